/**
 * V8 flags the server runs under; `batchserve serve` started without them starts Node again
 * with them (src/cli/serve-launcher.ts), and bench starts its own server with them.
 *
 * Why: a server's live heap is small (about 20 MB) while its young generation grows to 16 MB
 * semi-spaces under load, and V8 then sets the old generation's limit so close above its size
 * (less than one young generation) that it begins a major GC as soon as the last one ends. On
 * the demo model that was a mark-compact every 300 ms even at one request in flight, whose
 * incremental steps held the main thread up to 25 ms. A floor of 64 MB under the limit leaves
 * room: one mark-compact in 10 s at one request in flight, half the time collecting, and a p99
 * 0.58–0.77 × the default's in two runs (docs/benchmarks.md, "The server's heap"; at concurrency
 * 64 it does little). The flag may not go
 * in NODE_OPTIONS, and set at run time (v8.setFlagsFromString) it does not act: it has to be on
 * Node's command line.
 */
export const SERVING_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=64'];

/** Whether `execArgv` sets every flag of SERVING_NODE_FLAGS, to any value (a user's own size wins). */
export function hasServingNodeFlags(execArgv: readonly string[]): boolean {
  return SERVING_NODE_FLAGS.every((flag) => {
    const name = flag.split('=')[0] as string;
    return execArgv.some((given) => given === name || given.startsWith(`${name}=`));
  });
}
