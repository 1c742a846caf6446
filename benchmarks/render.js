// The printed figures of each benchmark, rendered from its JSON result: the script prints them
// as it runs, and `npm run docs:bench` puts the same text into docs/benchmarks.md. Where a
// benchmark has rounds, its page block keeps the header and the summary (which lists each
// round's ratios); the per-round lines stay in the script's output and the results file.

function environmentLines(result, { onnxruntimeLoaded = true } = {}) {
  const env = result.environment;
  const system = [env.platform, env.release].filter(Boolean).join(' ');
  const load = env.loadAverage ? `, load average ${env.loadAverage[0]}` : '';
  const provenance =
    result.source === 'run'
      ? `run ${result.date.slice(0, 16).replace('T', ' ')} UTC${result.quick ? ' with --quick: its shortest settings, rougher figures' : ''}`
      : `${result.source} (figures of ${result.date.slice(0, 10)} or earlier)`;
  // One line: the page carries a dozen of these blocks.
  return [
    `${env.cpu} × ${env.cpus}${system ? `, ${system}` : ''}${load}; node ${env.node}, onnxruntime-node ${env.onnxruntime}` +
      `${onnxruntimeLoaded ? '' : ' (not loaded)'}; ${provenance}`,
  ];
}

const fixed = (value, digits) => value.toFixed(digits);

/** Items joined with "; " in lines of at most `width` characters, each line indented. */
function wrapped(items, width = 110) {
  const lines = [];
  for (const item of items) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last].length + item.length + 2 <= width) lines[last] += `; ${item}`;
    else lines.push(`  ${item}`);
  }
  return lines;
}
const metOrMissed = (met) => (met ? 'met' : 'MISSED');

export const clientThroughput = {
  header(result) {
    const { settings, environment } = result;
    return [
      ...environmentLines(result, { onnxruntimeLoaded: false }),
      `undici ${environment.undici}, autocannon ${environment.autocannon}`,
      settings.pinned
        ? 'server pinned to CPU 0 (taskset -c 0), each client to CPU 1 (taskset -c 1)'
        : 'not pinned (taskset missing or a single CPU): figures include CPU contention with the server',
      ...(settings.wrk ? [] : ['wrk not installed, skipped']),
      `load: POST ${settings.bodyBytes}-byte JSON body, concurrency ${settings.concurrency}, ${settings.seconds} s per run ` +
        `(after ${settings.warmupSeconds} s warm-up for ours and autocannon), ${settings.rounds} rounds`,
      '',
    ].join('\n');
  },
  run(run) {
    return (
      `round ${run.round}  ${run.client.padEnd(15)} ${fixed(run.rate, 0).padStart(7)} req/s  ` +
      `${fixed(run.cpuUs, 1).padStart(5)} µs CPU/request  (${run.note})`
    );
  },
  summary(result) {
    return [
      `\nmedians of ${result.settings.rounds} rounds:`,
      ...result.medians.map(
        ({ client, rate, cpuUs }) =>
          `  ${client.padEnd(15)} ${fixed(rate, 0).padStart(7)} req/s  ${fixed(cpuUs, 1).padStart(5)} µs CPU/request`,
      ),
      ...result.targets.map(
        ({ reference, target, ratio, cpuRatio, met }) =>
          `ours / ${reference}: ${fixed(ratio, 2)} req/s (target ≥ ${fixed(target, 2)}: ${metOrMissed(met)}), ` +
          `${fixed(cpuRatio, 2)}× its CPU per request`,
      ),
    ].join('\n');
  },
  render(result) {
    return [this.header(result).trimEnd(), this.summary(result)].join('\n');
  },
};

export const eventLoopStall = {
  header(result) {
    const { settings } = result;
    return [
      ...environmentLines(result),
      `tiny model: ${settings.warmupRequests} warm-up requests, then ${settings.requests} timed at concurrency 1, ` +
        `alone and while ${settings.imageClients} clients send ${settings.image} PNGs`,
    ].join('\n');
  },
  mode({ thread, alone, loaded, ratio, loopDelay }, { imageClients, image }) {
    const latency = ({ p50, p99 }) => `p50 ${fixed(p50, 3)} ms, p99 ${fixed(p99, 3)} ms`;
    return [
      `runtime.thread: ${thread}: alone ${latency(alone)}; while ${imageClients} clients send ${image} PNGs ${latency(loaded)}`,
      `  loaded ÷ alone: p50 ${fixed(ratio.p50, 1)}×, p99 ${fixed(ratio.p99, 1)}×; ` +
        `event-loop delay under image load: p99 ${fixed(loopDelay.p99, 1)} ms, max ${fixed(loopDelay.max, 1)} ms`,
    ].join('\n');
  },
  render(result) {
    return [this.header(result), ...result.modes.map((mode) => this.mode(mode, result.settings))].join('\n');
  },
};

export const servedVsInProcess = {
  render(result) {
    const { settings, inProcess } = result;
    const lines = [
      ...environmentLines(result),
      settings.pinned
        ? 'server pinned to CPU 0, client to CPU 1 (taskset)'
        : 'taskset not found: server and client share the CPUs',
      `sweep: batch sizes ${settings.batchSizes.join(', ')} × delays ${settings.delays.join(', ')} × ` +
        `concurrency ${settings.concurrency.join(', ')}; ${settings.window} windows after ${settings.warmup} warm-up, ` +
        `up to ${settings.duration}`,
      `in-process: c = ${fixed(inProcess.c, 3)} ms, m = ${fixed(inProcess.m, 3)} ms, ` +
        (inProcess.ceiling === undefined
          ? `fit failed (${inProcess.failure}), `
          : `ceiling ${fixed(inProcess.ceiling, 2)}×, `) +
        `limit ${fixed(inProcess.limit, 0)} items/s`,
    ];
    for (const served of result.protocols) {
      const { best, verdicts } = served;
      const verdict = (key) => {
        const { aim, met } = verdicts.find((each) => each.key === key);
        return `aim ${aim}: ${metOrMissed(met)}`;
      };
      lines.push(
        `\n${served.protocol}: best ${fixed(best.itemsPerSecond, 0)} items/s at B=${best.batchSize} delay ${best.delayUs} µs, ` +
          `concurrency ${best.concurrency}`,
        `  served ÷ in-process limit            ${fixed(served.servedRatio, 3)}  (${verdict('served')})`,
        `  realized speedup ÷ predicted S(${best.batchSize})    ${fixed(served.speedupRatio, 3)}  ` +
          `(${verdict('speedup')}; realized ${fixed(served.realizedSpeedup, 2)}×, predicted ${fixed(served.predictedSpeedup, 2)}×)`,
        `  added p50 latency at c=1, delay 0    ${fixed(served.addedP50Us, 0)} µs  ` +
          `(${verdict('latency')}; served p50 ${fixed(served.soloP50Ms, 3)} ms − in-process T(1) ${fixed(inProcess.t1, 3)} ms` +
          (served.roundTripMs === undefined ? ')' : ` − trivial round trip ${fixed(served.roundTripMs, 3)} ms)`),
      );
    }
    return lines.join('\n');
  },
};

export const overload = {
  render(result) {
    const { settings } = result;
    const lines = [
      ...environmentLines(result),
      settings.pinned
        ? 'server pinned to CPU 0, client to CPU 1 (taskset)'
        : 'taskset not found: server and client share the CPUs',
      `demo model, max_queue_size ${settings.maxQueueSize}; closed loop, ${settings.measureMs / 1000} s per run after ` +
        `${settings.warmupMs / 1000} s warm-up; concurrency doubled (up to ${settings.searchUpTo}) until goodput rose ` +
        `≤ ${settings.riseAtLeastPct}% ${settings.flatRuns} times in a row, then ${settings.overloadFactor} × the last ` +
        `that raised it more`,
    ];
    const ms = (summary, key) => (summary ? fixed(summary[key], 2) : '—');
    const row = (point) =>
      `  ${String(point.concurrency).padStart(11)}${fixed(point.goodput, 0).padStart(10)}` +
      `${fixed(point.rejectedPerSecond, 0).padStart(8)}${ms(point.ok, 'p50Ms').padStart(12)}${ms(point.ok, 'p99Ms').padStart(12)}` +
      `${ms(point.rejected, 'p50Ms').padStart(12)}${ms(point.rejected, 'p99Ms').padStart(12)}` +
      `${fixed(point.clientCpuShare * 100, 0).padStart(11)}%`;
    for (const served of result.protocols) {
      const { overloaded, verdicts } = served;
      const verdict = (key) => {
        const { aim, met } = verdicts.find((each) => each.key === key);
        return `aim ${aim}: ${metOrMissed(met)}`;
      };
      const errors = Object.entries(overloaded.errors).map(([kind, count]) => `${count} ${kind}`);
      lines.push(
        `\n${served.protocol}: peak goodput ${fixed(served.peakGoodput, 0)} req/s, saturation at concurrency ${served.saturation}`,
        '  concurrency  goodput/s   503/s  2xx p50 ms  2xx p99 ms  503 p50 ms  503 p99 ms  client CPU',
        ...served.search.map(row),
        `${row(overloaded)}  ← overloaded, ${settings.overloadFactor} × ${served.saturation}`,
        `  ${fixed(overloaded.rejectedShare * 100, 0)}% of the answers there were 503` +
          (errors.length > 0 ? `, errors: ${errors.join(', ')}` : ''),
        `  goodput ÷ peak goodput ${fixed(served.goodputRatio, 3)} (${verdict('goodput')}); ` +
          `503 p99 latency ${served.rejectP99Ms === null ? 'no 503s' : `${fixed(served.rejectP99Ms, 2)} ms`} (${verdict('reject-p99')})`,
      );
    }
    return lines.join('\n');
  },
};

export const grpcVsRest = {
  header(result) {
    const { settings, environment } = result;
    const seconds = (ms) => `${ms / 1000} s`;
    return [
      ...environmentLines(result),
      `@grpc/grpc-js ${environment['@grpc/grpc-js']}, undici ${environment.undici}`,
      settings.pinned
        ? `server pinned to CPU 0, client to CPU 1 (taskset); the server's threads may run on CPU ${settings.serverThreadCpus.join(' / ')}`
        : 'taskset not found: server and client share the CPUs',
      `demo model, max_queue_delay 0, intra_op_threads 1; one random 1×3×48×192 FP32 row a request (110 KB); closed loop at ` +
        `concurrency ${settings.levels.throughput} and ${settings.levels.latency}, ${seconds(settings.warmupMs)} warm-up ` +
        `then ${settings.windows} × ${seconds(settings.windowMs)}; ${settings.rounds} rounds, the protocols' order rotating`,
      'CPU µs/request: the server over the whole run, the client over the measured windows',
      '',
    ].join('\n');
  },
  run(run) {
    const errors = Object.entries(run.errors).map(([kind, count]) => `${count} ${kind}`);
    return (
      `round ${run.round}  c=${String(run.concurrency).padEnd(3)} ${run.protocol.padEnd(12)}` +
      `${fixed(run.throughput, 0).padStart(6)} req/s  p50 ${fixed(run.p50Ms, 2).padStart(6)} ms  ` +
      `p99 ${fixed(run.p99Ms, 2).padStart(6)} ms  CPU µs/request: server ${fixed(run.serverCpuUs, 0).padStart(5)}, ` +
      `client ${fixed(run.clientCpuUs, 0).padStart(4)}${errors.length > 0 ? `  errors: ${errors.join(', ')}` : ''}`
    );
  },
  summary(result) {
    const { levels, rounds } = result.settings;
    const c = (key) => `c=${levels[key]}`;
    const cpu = ({ throughput, latency }) => `${fixed(throughput, 0).padStart(6)} /${fixed(latency, 0).padStart(5)}`;
    const ratios = (values) => values.map((value) => fixed(value, 2)).join(', ');
    return [
      `\nmedians of ${rounds} rounds:`,
      `                ${c('throughput')} req/s  ${c('latency')} p50 ms  server CPU µs/req (${c('throughput')} / ${c('latency')})` +
        `  client CPU µs/req (${c('throughput')} / ${c('latency')})`,
      ...result.medians.map(
        (each) =>
          `  ${each.protocol.padEnd(12)}${fixed(each.throughput, 0).padStart(11)}${fixed(each.p50Ms, 3).padStart(12)}` +
          `${cpu(each.serverCpuUs).padStart(22)}${cpu(each.clientCpuUs).padStart(30)}`,
      ),
      ...result.ratios.map(({ protocol, throughputRatio, throughputRatios, p50Ratio, p50Ratios, verdicts }) => {
        const verdict = (key) => {
          const { aim, met } = verdicts.find((each) => each.key === key);
          return `aim ${aim}: ${metOrMissed(met)}${protocol === 'grpc' ? '' : ', for comparison'}`;
        };
        return [
          `${protocol} ÷ v2-binary:`,
          `  throughput at ${c('throughput')}   ${fixed(throughputRatio, 3)}  (${verdict('throughput')}; rounds ${ratios(throughputRatios)})`,
          `  p50 at ${c('latency')}           ${fixed(p50Ratio, 3)}  (${verdict('p50')}; rounds ${ratios(p50Ratios)})`,
        ].join('\n');
      }),
    ].join('\n');
  },
  render(result) {
    return [this.header(result).trimEnd(), this.summary(result)].join('\n');
  },
};

/** Per-round ratios as the summaries list them: 0.97, 1.02, 0.95. */
const ratioList = (values) => values.map((value) => fixed(value, 2)).join(', ');

export const ocrPipeline = {
  /** The page's block: the rounds' ratios stay in the summary, their lines in the script's output. */
  page(result) {
    return ocrPipeline.render({ ...result, rounds: [] });
  },
  render(result) {
    const { settings, rounds, medians, linesPerImage } = result;
    const reads = (run) => `${run.correct}/${run.images} read exactly`;
    const rate = (value) => `${fixed(value, 2).padStart(5)} images/s`;
    return [
      ...environmentLines(result),
      settings.pinned
        ? 'reference and server pinned to CPU 0 (taskset -c 0), client to CPU 1'
        : 'not pinned (taskset missing or a single CPU): figures include CPU contention with the client',
      `${settings.images} rendered PNGs (360×200, ${linesPerImage} lines each, one upside down in every other image); ` +
        `each run reads them ${settings.passes}×, ${settings.rounds} round(s) alternating reference and served runs`,
      ...rounds.flatMap(({ round, reference, served }) => [
        `\nround ${round}`,
        `  in process, readText one image at a time  ${rate(reference.rate)}  (${reads(reference)})`,
        ...served.map(
          (run) =>
            `  served pipeline, concurrency ${String(run.concurrency).padStart(2)}       ${rate(run.rate)}  ` +
            `${fixed(run.ratio, 2)}× in process; ocr-rec ${fixed(run.recognizerRowsPerPass, 1)} lines a pass  ` +
            `(${reads(run)})`,
        ),
      ]),
      `\nmedians over rounds: in process ${rate(medians.referenceRate)}`,
      ...medians.served.map(
        (run) =>
          `  served at concurrency ${String(run.concurrency).padStart(2)}: ${rate(run.rate)}, ` +
          `${fixed(run.ratio, 2)}× in process (rounds ${run.ratios.map((ratio) => fixed(ratio, 2)).join(', ')})`,
      ),
    ].join('\n');
  },
};

export const accelerator = {
  header(result) {
    const { settings } = result;
    return [
      ...environmentLines(result),
      (settings.pinned
        ? 'server pinned to CPU 0 (taskset -c 0), client (this process) on CPU 1; '
        : 'not pinned (taskset missing or a single CPU): figures include CPU contention with the server; ') +
        (settings.keepAwake
          ? 'keep-awake: a nice-19 busy loop ran on each core while K = 1 and the floor were measured'
          : 'no keep-awake loops: low-load latency includes vCPU wake-ups (about 1 ms here)'),
      `devices ${(settings.devices ?? ['sim']).join(', ')}: T(B) = ${settings.cost.cMs} + ${settings.cost.mMs}·B ms, max_batch_size ${settings.maxBatchSize}, ` +
        `[1, 16] FP32 v2 JSON bodies, closed loop of K clients; auto with max_latency ${settings.maxLatencyMs} ms; ` +
        `each figure: ${settings.slices * 2} slices of ${settings.windows} × ${settings.windowMs} ms (A B B A), served ÷ the limit the device allows`,
    ].join('\n');
  },
  level(points) {
    const [{ device = 'sim', instances, concurrency, limit }] = points;
    const cells = points.map(
      (p) =>
        `${p.policy === '2000' ? '2ms' : p.policy} ${fixed(p.ratio, 2)} (B ${fixed(p.averageBatch, 1)}, p50 ${fixed(p.p50Ms, 2)}, p99 ${fixed(p.p99Ms, 1)}${p.busyShare === null ? '' : `, busy ${fixed(p.busyShare, 2)}`}${p.passOverMs == null ? '' : `, pass +${fixed(p.passOverMs, 2)}`}${p.refused > 0 ? `, ${p.refused} × 503` : ''})`,
    );
    return `${device.padEnd(8)} ${instances}× K=${String(concurrency).padEnd(3)} limit ${fixed(limit, 0).padStart(4)}/s  ${cells.join('  ')}`;
  },
  /** A device's open loop in one line: per share of capacity, achieved ÷ offered (p50 and p99 ÷ T(32), mean batch, refusals). */
  openLoop(points) {
    const cells = points.map(
      (p) =>
        `${Math.round(p.share * 100)} %${p.control ? ' again' : ''} ${fixed(p.achievedRatio, 3)} (p50 ${fixed(p.p50OverT32, 2)}, p99 ${fixed(p.p99OverT32, 2)}, B ${fixed(p.averageBatch, 1)}` +
        `${p.refused > 0 ? `, ${p.refused} × 503` : ''}${p.errors > p.refused ? `, ${p.errors} errors` : ''})`,
    );
    return `${points[0].device.padEnd(8)} open loop, 1×, auto: achieved ÷ offered (p50, p99 ÷ T(32))  ${cells.join('  ')}`;
  },
  summary(result) {
    const one = result.floors.find((f) => f.concurrency === 1);
    const gathering = result.floors.filter((f) => f.concurrency > 1);
    const passMs = result.settings.cost.cMs + result.settings.cost.mMs;
    // The met aims only as a count: the table above shows each figure they judged.
    const missed = result.verdicts.filter(({ met }) => !met);
    return [
      (one
        ? `floor (bare node:http waiting T(1)) at K=1: p50 ${fixed(one.p50Ms, 2)} ms, adds ${fixed(one.p50Ms - passMs, 2)} ms; `
        : '') +
        (gathering.length > 0
          ? `gathering floor (node:http told K: waits for all K, then T(K)), ÷ the limit: ` +
            gathering.map((f) => `K=${f.concurrency} ${fixed(f.ratio, 2)}`).join(', ') +
            '; '
          : '') +
        `aims met: ${result.verdicts.filter(({ met }) => met).length} of ${result.verdicts.length}` +
        (missed.length === 0 ? '' : `; MISSED ${missed.length}:`),
      ...wrapped(
        missed.map(({ label }) => label),
        250,
      ),
    ].join('\n');
  },
  render(result) {
    const byLevel = new Map();
    // Two instances below K = 16 are no longer measured (accelerator.js, levelsFor); older results had them.
    for (const point of result.points.filter((p) => p.instances === 1 || p.concurrency >= 16)) {
      const key = `${point.device ?? 'sim'}:${point.instances}:${point.concurrency}`;
      byLevel.set(key, [...(byLevel.get(key) ?? []), point]);
    }
    const devices = result.settings.devices ?? ['sim'];
    const openLoop = result.openLoop ?? [];
    return [
      this.header(result),
      ...devices.flatMap((device) => [
        ...[...byLevel.values()]
          .filter(([point]) => (point.device ?? 'sim') === device)
          .map((level) => this.level(level)),
        ...(openLoop.some((p) => p.device === device)
          ? [this.openLoop(openLoop.filter((p) => p.device === device))]
          : []),
      ]),
      this.summary(result),
    ].join('\n');
  },
};

/** Each results/<name>.json's renderer, by name: the names the docs' markers use. */
/** Part 3's figures, '—' where a phase had no sample (null, or NaN in a ratio). */
const msOrDash = (value) => (value === null || !Number.isFinite(value) ? '—' : fixed(value, 0));
const fixedOrDash = (value, digits) => (value === null || !Number.isFinite(value) ? '—' : fixed(value, digits));

export const generation = {
  header({ settings, decoder }) {
    const { vsLoop } = settings;
    return [
      (settings.pinned
        ? 'server or loop on CPU 0 (taskset -c 0), client on CPU 1'
        : 'not pinned (taskset missing or a single CPU)') +
        `, one intra-op thread; ${vsLoop.rounds} round(s) of loop, served, served, loop, ` +
        `a fresh process each, ${vsLoop.warmupTokens}-token warm-up`,
      `bench decoder ${fixed(decoder.parameters / 1e6, 1)} M parameters, greedy; decode tokens/s = B·(N − 1) ÷ (first token → last); ` +
        "TTFT the slowest of B; peak RSS: VmHWM, the median run's",
    ].join('\n');
  },
  vsLoopRun(point, run) {
    const head = `B=${String(point.batch).padEnd(2)} P=${String(point.promptTokens).padEnd(3)} N=${String(point.newTokens).padEnd(3)} round ${point.round}  ${run.side.padEnd(6)}`;
    const rate = `${fixed(run.tokensPerSecond, 0).padStart(5)} tokens/s`;
    const rss = `peak RSS ${fixed(run.peakRssMiB, 0)} MiB`;
    if (run.side === 'loop') return `${head} ${rate}  prefill ${fixed(run.prefillMs, 0)} ms  ${rss}`;
    return (
      `${head} ${rate}  TTFT ${fixed(run.firstTokenMs, 0)} ms  ${rss} (sampled ${fixed(run.sampledRssMiB, 0)})  ` +
      `after T0 ${run.tokensAfterT0}/${run.expectedAfterT0}  chunks = usage: ${run.chunksMatchUsage ? 'yes' : 'NO'}  ` +
      `answers = loop's: ${run.sameAnswers}/${point.batch}`
    );
  },
  /** Part 1's table: its header for `rounds` rounds, then a line a point. */
  vsLoopColumns(rounds, cells) {
    const [batch, prompt, tokens, loop, served, ratio, ratios, controls, ttft, rss] = cells;
    return (
      `${batch.padStart(4)}${prompt.padStart(5)}${tokens.padStart(5)}${loop.padStart(7)}${served.padStart(8)}${ratio.padStart(7)} ` +
      `${ratios.padEnd(6 * rounds)}  ${controls.padStart(Math.max(7, 6 * rounds - 2))}${ttft.padStart(9)}   ${rss}`
    );
  },
  vsLoopPoint(point) {
    const { loop, served } = point;
    const notes = [
      ...(served.chunksMatchUsage ? [] : ['chunks ≠ usage']),
      ...(served.sameAnswers < point.batch ? [`${served.sameAnswers}/${point.batch} answers = loop's`] : []),
    ];
    return generation.vsLoopColumns(point.ratios.length, [
      String(point.batch),
      String(point.promptTokens),
      String(point.newTokens),
      fixed(loop.tokensPerSecond, 0),
      fixed(served.tokensPerSecond, 0),
      fixed(point.ratio, 2),
      `(${ratioList(point.ratios)})`,
      ratioList(point.controls),
      fixed(served.firstTokenMs, 0),
      `${fixed(loop.peakRssMiB, 0)} / ${fixed(served.peakRssMiB, 0)} = ${fixed(point.rssRatio, 2)}${notes.map((note) => `  ${note}`).join('')}`,
    ]);
  },
  /** Part 2, each level in full as the script prints it. */
  level(level) {
    const side = (name, figures) =>
      `  ${name.padEnd(9)} ${fixed(figures.tokensPerSecond, 0).padStart(5)} tokens/s  ITL p50 ${fixed(figures.interTokenP50Ms, 1)} ms, p99 ${fixed(figures.interTokenP99Ms, 1)} ms  TTFT p99 ${fixed(figures.firstTokenP99Ms, 0)} ms${figures.errors ? `  ${figures.errors} errors` : ''}`;
    return [
      `sim: ${level.workload} max_tokens, ${level.concurrency} streaming clients`,
      side('iteration', level.iteration),
      side('request', level.request),
      `  iteration ÷ request ${fixed(level.ratio, 2)}×; control (iteration ÷ itself) ${fixed(level.control, 3)}`,
    ].join('\n');
  },
  /** Part 2, a level in one line. */
  simLine(level) {
    const { iteration, request } = level;
    return (
      `  ${`${level.workload} K=${level.concurrency}`.padEnd(17)}${fixed(iteration.tokensPerSecond, 0).padStart(5)} / ${fixed(request.tokensPerSecond, 0).padStart(4)} tokens/s = ` +
      `${fixed(level.ratio, 2)}× (control ${fixed(level.control, 3)}); p99 ITL ${fixed(iteration.interTokenP99Ms, 1)} / ${fixed(request.interTokenP99Ms, 1)} ms` +
      `${iteration.errors + request.errors ? `; ${iteration.errors + request.errors} errors` : ''}`
    );
  },
  longPromptPhase(phase, settings) {
    const errors = Object.values(phase.errors).reduce((sum, count) => sum + count, 0);
    return (
      `long prompts, ${phase.loaded ? `loaded (${phase.longRequests} × ${settings.longPromptTokens} tokens, their TTFT p50 ${msOrDash(phase.longFirstTokenMs)} ms)` : 'alone'}: ` +
      `${phase.requests} short requests, TTFT p50 ${msOrDash(phase.firstTokenMs.p50)} ms, p99 ${msOrDash(phase.firstTokenMs.p99)} ms; ` +
      `short streams ${fixed(phase.shortTokensPerSecond, 0)} tokens/s${errors ? `; ${errors} errors` : ''}`
    );
  },
  render(result) {
    const { settings, vsLoop, levels, longPrompt, verdicts } = result;
    const { sim } = settings;
    const lp = settings.longPrompt;
    const missed = verdicts.filter(({ met }) => !met);
    return [
      ...environmentLines(result),
      generation.header(result),
      'served ÷ plain loop, decode tokens/s (medians; each round in brackets); peak RSS MiB loop / served',
      generation.vsLoopColumns(settings.vsLoop.rounds, [
        'B',
        'P',
        'N',
        'loop',
        'served',
        'ratio',
        '(rounds)',
        'control',
        'TTFT ms',
        'peak RSS',
      ]),
      ...vsLoop.map((point) => generation.vsLoopPoint(point)),
      `sim (step ${sim.cost.cMs} ms + ${sim.cost.mMs} ms a token, ${sim.activeSequences} rows, answers ${sim.tokens[0]}–${sim.tokens[1]}, ` +
        `A B B A of ${sim.durationMs / 1000} s): iteration / request`,
      ...levels.map((level) => generation.simLine(level)),
      `TTFT of ${lp.clients} clients (${lp.promptTokens}-token prompts, ${lp.maxTokens} tokens; A B B A of ${lp.durationMs / 1000} s): alone p50 ${msOrDash(longPrompt.alone.p50)} ms, ` +
        `p99 ${msOrDash(longPrompt.alone.p99)} ms (control ${fixedOrDash(longPrompt.control, 2)})`,
      `  while ${lp.longPromptTokens}-token prompts join (${lp.longMaxTokens} tokens, ${longPrompt.longRequests} sent): ` +
        `p50 ${msOrDash(longPrompt.loaded.p50)} ms, p99 ${msOrDash(longPrompt.loaded.p99)} ms: ${fixedOrDash(longPrompt.ratio.p50, 1)}× and ${fixedOrDash(longPrompt.ratio.p99, 1)}×; ` +
        `short streams ${fixed(longPrompt.shortTokensPerSecond.alone, 0)} → ${fixed(longPrompt.shortTokensPerSecond.loaded, 0)} tokens/s`,
      `aims met: ${verdicts.length - missed.length} of ${verdicts.length}` +
        (missed.length === 0 ? '' : `; MISSED ${missed.length}:`),
      ...wrapped(missed.map(({ label }) => label)),
    ].join('\n');
  },
};

export const embeddings = {
  render(result) {
    const { settings, inProcess, served, verdicts } = result;
    return [
      ...environmentLines(result),
      settings.pinned
        ? 'server pinned to CPU 0 (taskset -c 0), client and in-process runs to CPU 1'
        : 'not pinned (taskset missing or a single CPU)',
      `simulated pass of B texts: ${settings.cost.cMs} ms + ${settings.cost.mMs} ms × B; ${settings.durationMs / 1000} s a run`,
      ...inProcess.map(
        (figures) =>
          `in process, full batches of ${figures.batch} back to back: ${fixed(figures.before, 0)} then ${fixed(figures.after, 0)} texts/s (control ${fixed(figures.control, 3)})`,
      ),
      ...served.map(
        (point) =>
          `served, ${settings.concurrency} clients, max_batch_size ${String(point.batch).padStart(2)}, delay ${point.delay.padEnd(3)}: ` +
          `${fixed(point.textsPerSecond, 0)} texts/s, ${fixed(point.ratio, 3)} of in process; p50 ${fixed(point.p50Ms, 1)} ms, p99 ${fixed(point.p99Ms, 1)} ms` +
          `${point.errors ? `, ${point.errors} errors` : ''}`,
      ),
      ...verdicts.map((verdict) => `${metOrMissed(verdict.met)}: ${verdict.label}`),
    ].join('\n');
  },
};

export const predict = {
  render(result) {
    const { settings, inProcess, plainLoop, served, rss, rssGrowth, inputs, verdicts } = result;
    const list = (values, digits) => values.map((value) => fixed(value, digits)).join(', ');
    const [fewer, more] = settings.rows;
    return [
      ...environmentLines(result),
      `batch ${settings.batchSize}, model on one thread (intra_op_threads and inter_op_threads 1) unless "stock threads"; ${settings.rounds} rounds`,
      `plain onnxruntime loop (benchmarks/ort-loop.js), before and after predict in each round: ` +
        `${plainLoop.rounds.map(({ before, after }) => `${fixed(before, 0)}/${fixed(after, 0)}`).join(', ')} items/s; ` +
        `control (after ÷ before) ${list(plainLoop.controlRatios, 3)}`,
      `bench --in-process, median of ${settings.rounds}: ${fixed(inProcess.itemsPerSecond, 0)} items/s (${list(inProcess.rounds, 0)}); stock threads ${fixed(inProcess.stockThreads, 0)}`,
      `served best (v2-binary), from bench:served's own run of ${served.date.slice(0, 10)}${served.cpu ? ` on ${served.cpu}` : ''}, not this one: ` +
        `${fixed(served.itemsPerSecond, 0)} items/s at B=${served.batchSize}`,
      `npy, ${fewer} rows, each round ÷ the loop around it: ${list(plainLoop.npyRatios, 3)}`,
      ...inputs.map(
        (run) =>
          `${run.input.padEnd(6)} (${run.handler}, ${run.rows} rows): ${fixed(run.rowsPerSecond, 0)} rows/s, ` +
          `÷ plain loop ${fixed(run.vsPlainLoop, 2)}, ÷ in-process ${fixed(run.vsInProcess, 2)}, ÷ served ${fixed(run.vsServed, 2)}`,
      ),
      `peak RSS ${fixed(rss[0].peakRssMiB, 0)} MiB for ${fewer} rows, ${fixed(rss[1].peakRssMiB, 0)} MiB for ${more}: growth ${fixed(rssGrowth * 100, 1)} %`,
      ...verdicts.map((verdict) => `${metOrMissed(verdict.met)}: ${verdict.label}`),
    ].join('\n');
  },
};

export const drainResets = {
  header(result) {
    const { settings } = result;
    return [
      ...environmentLines(result),
      `the affine model served by \`serve\`; ${settings.clients} keep-alive clients (node:http Agent), each sending its next ` +
        `inference as its last is answered; SIGTERM once each has had ${settings.warmAnswers} answers; ${settings.runs} runs, a fresh server each`,
      '',
    ].join('\n');
  },
  run(run) {
    const list = (counts) =>
      Object.entries(counts)
        .map(([key, count]) => `${key} ${count}`)
        .join(', ') || 'none';
    return `run ${String(run.run).padStart(2)}: answers ${list(run.answers)}; clients ended on ${list(run.ends)}; exit ${run.exitCode}`;
  },
  summary(result) {
    const { summary, settings } = result;
    return [
      `\nover ${settings.runs} runs: ${summary.requests} requests answered (${summary.served} served, ${summary.refusedWith503} 503 ` +
        `with Connection: close); resets ${summary.resets}, hangs ${summary.hangs}, other failures ${summary.otherEnds}, ` +
        `5xx but 503 ${summary.errorAnswers}, runs exiting other than 0 ${summary.badExits}`,
      `aims: ${summary.verdicts.map(({ key, aim, met }) => `${key} ${aim}: ${metOrMissed(met)}`).join('; ')}`,
    ].join('\n');
  },
};

export const tracingOff = {
  render(result) {
    const { settings, verdict } = result;
    // A round: its four runs in order (reference, current, current, reference), then its ratio and control.
    const rounds = result.rounds.map((round, index) => {
      const runs = result.runs.slice(index * 4, index * 4 + 4).map((run) => fixed(run.throughput, 1));
      return `${index + 1}: ${runs.join(' ')} → ${fixed(round.ratio, 3)} (${fixed(round.control, 3)})`;
    });
    return [
      ...environmentLines(result),
      `the demo model, v2 binary tensors, concurrency ${settings.concurrency}, ${settings.windows} windows of ${settings.windowMs} ms, ` +
        `${settings.rounds} rounds; reference ${result.reference} (no tracing), current: this build, no --otlp-endpoint`,
      'req/s by round: reference, current, current, reference → current ÷ reference (control: reference ÷ reference)',
      ...wrapped(rounds, 140),
      `medians: current ÷ reference ${fixed(result.ratio, 3)}, control ${fixed(result.control, 3)}; aim ${verdict.aim}: ` +
        `${verdict.judged ? metOrMissed(verdict.met) : 'not judged (the control moved more than the aim allows)'}`,
    ].join('\n');
  },
};

export const generationControls = {
  render(result) {
    const { settings, constrained, prefix, verdicts } = result;
    const rounds = (list) =>
      list.map((round) => `${fixed(round.ratio, 3)} (control ${fixed(round.control, 3)})`).join(', ');
    return [
      ...environmentLines(result),
      `${settings.pinned ? 'server on CPU 0 (taskset -c 0), client on CPU 1' : 'not pinned (taskset missing or a single CPU)'}, one intra-op thread; ` +
        `bench decoder with a byte-level BPE tokenizer of its 1,024 ids; ${settings.rounds} round(s)`,
      `constrained decoding: ${settings.batch} streams at once, 32-token prompts, ${settings.newTokens} tokens greedy, free against bound to a JSON schema (free, json, json, free)`,
      `  decode tokens/s free ${fixed(constrained.free, 0)}, json ${fixed(constrained.json, 0)}: ${fixed(constrained.ratio, 3)}; by round ${rounds(constrained.rounds)}`,
      `prefix caching: one at a time, a ${settings.systemTokens}-token system prompt and ${settings.turns} ${settings.turnTokens}-token turns (cached, uncached, uncached, cached)`,
      `  TTFT p50 cached ${fixed(prefix.cachedMs, 1)} ms, uncached ${fixed(prefix.uncachedMs, 1)} ms: ${fixed(prefix.ratio, 3)}; by round ${rounds(prefix.rounds)}; the same answers: ${prefix.sameAnswers ? 'yes' : 'NO'}`,
      ...verdicts.map((verdict) => `${metOrMissed(verdict.met)}: ${verdict.label}`),
    ].join('\n');
  },
};

export const renderers = {
  'tracing-off': (result) => tracingOff.render(result),
  'generation-controls': (result) => generationControls.render(result),
  predict: (result) => predict.render(result),
  embeddings: (result) => embeddings.render(result),
  generation: (result) => generation.render(result),
  'ocr-pipeline': (result) => ocrPipeline.page(result),
  accelerator: (result) => accelerator.render(result),
  'client-throughput': (result) => clientThroughput.render(result),
  'event-loop-stall': (result) => eventLoopStall.render(result),
  'served-vs-in-process': (result) => servedVsInProcess.render(result),
  overload: (result) => overload.render(result),
  'grpc-vs-rest': (result) => grpcVsRest.render(result),
  'pack-precision': (result) => packPrecision.render(result),
  'serving-heap': (result) => servingHeap.render(result),
};

export const packPrecision = {
  /** One variant's line; `reference` is the same model as exported. */
  row(row, reference) {
    const rate = (size) => row.itemsPerSecond[size] ?? 0;
    const ratio = (size) => (reference ? rate(size) / (reference.itemsPerSecond[size] ?? Infinity) : 1);
    const accuracy = row.accuracy;
    const error = accuracy?.maxRelError === null ? 'NaN/Inf' : accuracy ? accuracy.maxRelError.toExponential(1) : '—';
    const top1 = accuracy?.top1Agreement == null ? '—' : `${(accuracy.top1Agreement * 100).toFixed(1)} %`;
    const gate =
      accuracy?.passed === undefined ? '' : accuracy.passed ? 'passed' : 'FAILED (packed with --accept-accuracy-loss)';
    return (
      `${row.model.padEnd(30)} ${row.variant.padEnd(11)} ${fixed(row.startupMs, 0).padStart(5)} ms  ` +
      `${fixed(rate(1), 1).padStart(7)} ${fixed(ratio(1), 2).padStart(5)}×  ${fixed(rate(16), 1).padStart(7)} ${fixed(ratio(16), 2).padStart(5)}×  ` +
      `${error.padStart(7)}  ${top1.padStart(7)}  ${gate}`
    ).trimEnd();
  },
  render(result) {
    const { settings, rows } = result;
    const references = new Map(rows.filter((row) => row.variant === 'as exported').map((row) => [row.model, row]));
    return [
      ...environmentLines(result),
      settings.pinned
        ? `pinned to CPU 0 (taskset -c 0), ${settings.intraOpThreads} intra-op thread`
        : `not pinned (taskset missing), ${settings.intraOpThreads} intra-op thread`,
      `in process (bench --in-process), ${settings.rounds} rounds × ${settings.iterations} passes per batch size, ` +
        `${settings.clock === 'cpu' ? 'items per CPU-second of the pinned thread' : 'items per wall-clock second'}; ` +
        'accuracy on 64 seeded random rows against the model as exported',
      '',
      `${'model'.padEnd(30)} ${'variant'.padEnd(11)} start-up  ${'B=1 items/s'.padStart(15)}  ${'B=16 items/s'.padStart(15)}  ` +
        `rel err  top-1    gate`,
      ...rows.map((row) => this.row(row, references.get(row.model))),
    ].join('\n');
  },
};

export const servingHeap = {
  header(result) {
    const { settings, variants } = result;
    return [
      ...environmentLines(result),
      settings.pinned
        ? 'server pinned to CPU 0, client to CPU 1 (taskset)'
        : 'taskset not found: server and client share the CPUs',
      `the demo model (intra_op_threads 1, max_queue_delay 0) under ${variants.map((v) => v.label).join(' and under ')}, ` +
        `a fresh server each, alternating (the order turned each round); concurrency ${settings.concurrency.join(' and ')}, ` +
        `${settings.warmupMs} ms warm-up then ${settings.windows} × ${settings.windowMs} ms; ${settings.rounds} rounds; ` +
        "GC: the server's main thread, from its nodejs_gc_duration_seconds",
      '',
    ].join('\n');
  },
  round(round) {
    return [
      `round ${round.round}:`,
      ...round.runs.map(
        (run) =>
          `  ${run.variant.padEnd(8)} c=${String(run.concurrency).padEnd(3)} ${fixed(run.throughput, 0).padStart(5)} req/s  ` +
          `p50 ${fixed(run.p50Ms, 2).padStart(7)} ms  p99 ${fixed(run.p99Ms, 2).padStart(7)} ms  ` +
          `major GCs ${fixed(run.majorGcsPerSecond, 2).padStart(5)}/s  GC ${fixed(run.gcShare * 100, 1).padStart(4)} % of the time`,
      ),
    ].join('\n');
  },
  summary(result) {
    const { summary, variants } = result;
    const label = (name) => variants.find((variant) => variant.name === name)?.label ?? name;
    return [
      `\nmedians over rounds:`,
      ...summary.perVariant.flatMap(({ variant, levels }) => [
        `  ${label(variant)}:`,
        ...levels.map(
          (level) =>
            `    c=${String(level.concurrency).padEnd(3)} ${fixed(level.throughput, 0).padStart(5)} req/s  p50 ${fixed(level.p50Ms, 2)} ms  ` +
            `p99 ${fixed(level.p99Ms, 2)} ms  major GCs ${fixed(level.majorGcsPerSecond, 2)}/s  GC ${fixed(level.gcShare * 100, 1)} %`,
        ),
      ]),
      `with the flag ÷ without, same round: p99 at c=1 ${fixed(summary.p99RatioC1, 2)} (rounds ${ratioList(summary.p99RatiosC1)}; ` +
        `aim ${summary.verdicts[0].aim}: ${metOrMissed(summary.verdicts[0].met)}), ` +
        `throughput at c=64 ${fixed(summary.throughputRatioC64, 2)} (rounds ${ratioList(summary.throughputRatiosC64)}; ` +
        `aim ${summary.verdicts[1].aim}: ${metOrMissed(summary.verdicts[1].met)}), ` +
        `p99 at c=64 ${fixed(summary.p99RatioC64, 2)} (rounds ${ratioList(summary.p99RatiosC64)})`,
    ].join('\n');
  },
  render(result) {
    return [this.header(result).trimEnd(), this.summary(result)].join('\n');
  },
};
