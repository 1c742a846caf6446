/**
 * V8 flags the server runs under: bin/batchserve.js's shebang starts Node with them, as do the
 * container's ENTRYPOINT and bench's own server. A Node started otherwise (`node
 * bin/batchserve.js serve`) serves without them, and says so at start.
 *
 * Why: a server's live heap is small (about 20 MB) while its young generation grows to 16 MB
 * semi-spaces under load, and V8 then sets the old generation's limit so close above its size
 * (less than one young generation) that it begins a major GC as soon as the last one ends: a
 * mark-compact every few hundred ms even at one request in flight, whose incremental steps
 * hold the main thread. A floor of 64 MB under the limit leaves room (the figures:
 * docs/benchmarks.md, "The server's heap"). The flag may not go in NODE_OPTIONS, and set at run
 * time (v8.setFlagsFromString) it does not act: it has to be on Node's command line.
 */
export const SERVING_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=64'];

/** Whether `execArgv` sets every flag of SERVING_NODE_FLAGS, to any value (a user's own size wins). */
export function hasServingNodeFlags(execArgv: readonly string[]): boolean {
  return SERVING_NODE_FLAGS.every((flag) => {
    const name = flag.split('=')[0] as string;
    return execArgv.some((given) => given === name || given.startsWith(`${name}=`));
  });
}
