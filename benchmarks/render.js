// The printed figures of each benchmark, rendered from its JSON result: the script prints them
// as it runs, and `npm run docs:bench` puts the same text into docs/benchmarks.md.
import { CONTROL } from './adaptive-sweep.js';

function environmentLines(result, { onnxruntimeLoaded = true } = {}) {
  const env = result.environment;
  const system = [env.platform, env.release].filter(Boolean).join(' ');
  const load = env.loadAverage ? `, load average ${env.loadAverage[0]}` : '';
  const provenance =
    result.source === 'run'
      ? `run ${result.date.slice(0, 16).replace('T', ' ')} UTC${result.quick ? ' with --quick: its shortest settings, rougher figures' : ''}`
      : `${result.source} (figures of ${result.date.slice(0, 10)} or earlier)`;
  return [
    `machine: ${env.cpu} × ${env.cpus}${system ? `, ${system}` : ''}${load}`,
    `node ${env.node}, onnxruntime-node ${env.onnxruntime}${onnxruntimeLoaded ? '' : ' (not loaded)'}`,
    provenance,
  ];
}

const fixed = (value, digits) => value.toFixed(digits);
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
    return [this.header(result), ...result.runs.map((run) => this.run(run)), this.summary(result)].join('\n');
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
    const row = (label, p50, p99) => `  ${label.padEnd(40)}${p50.padStart(9)}${p99.padStart(9)}`;
    return [
      `\nruntime.thread: ${thread} — tiny model latency at concurrency 1`,
      row('', 'p50 ms', 'p99 ms'),
      row('alone', fixed(alone.p50, 3), fixed(alone.p99, 3)),
      row(`while ${imageClients} clients send ${image} PNGs`, fixed(loaded.p50, 3), fixed(loaded.p99, 3)),
      row('ratio loaded / alone', fixed(ratio.p50, 1), fixed(ratio.p99, 1)),
      `  event-loop delay under image load: p99 ${fixed(loopDelay.p99, 1)} ms, max ${fixed(loopDelay.max, 1)} ms`,
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
        `  overloaded, ${settings.overloadFactor} × ${served.saturation}:`,
        row(overloaded),
        `  ${fixed(overloaded.rejectedShare * 100, 0)}% of the answers at concurrency ${overloaded.concurrency} were 503` +
          (errors.length > 0 ? `, errors: ${errors.join(', ')}` : ''),
        `  goodput ÷ peak goodput    ${fixed(served.goodputRatio, 3)}  (${verdict('goodput')})`,
        `  503 p99 latency           ${served.rejectP99Ms === null ? 'no 503s' : `${fixed(served.rejectP99Ms, 2)} ms`}  ` +
          `(${verdict('reject-p99')})`,
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
    return [this.header(result), ...result.runs.map((run) => this.run(run)), this.summary(result)].join('\n');
  },
};

/**
 * A max_queue_delay (µs, or 'auto') as the tables print it: 0, 1ms, 500us, auto; bench:adaptive's
 * control, delay 0 measured a second time, is "0 again".
 */
export const delayLabel = (delay) => {
  if (delay === 'auto') return 'auto';
  if (delay === CONTROL) return '0 again';
  if (delay === 0) return '0';
  return delay % 1000 === 0 ? `${delay / 1000}ms` : `${delay}us`;
};

/** Per-round ratios as the summaries list them: 0.97, 1.02, 0.95. */
const ratioList = (values) => values.map((value) => fixed(value, 2)).join(', ');

/** The rows ahead auto's admission allowed after a level. */
const admissionLimit = (line) => (line.admissionLimitRows === null ? 'none' : `${line.admissionLimitRows} rows ahead`);

export const adaptive = {
  header(result) {
    const { settings } = result;
    const top = settings.concurrency.at(-1);
    return [
      ...environmentLines(result),
      settings.pinned
        ? 'servers pinned to CPU 0, client to CPU 1 (taskset)'
        : 'taskset not found: servers and client share the CPUs',
      `fixed delays ${settings.staticDelaysUs.map(delayLabel).join(', ')} and auto (max_latency ${settings.maxLatencyMs} ms), ` +
        'and delay 0 a second time ("0 again", the control), one fresh server per model each round, switched between them live as `bench --delays` does, intra_op_threads 1',
      `closed loop at concurrency ${settings.concurrency.join(', ')}, then Poisson arrivals at ` +
        `${settings.rateShare * 100}% of the best fixed delay's throughput at concurrency ${top} in the same round; ` +
        `${settings.warmupMs} ms warm-up then ${settings.windows} × ${settings.windowMs} ms per measurement; ` +
        `${settings.rounds} round${settings.rounds === 1 ? '' : 's'} on fresh servers (every level once at 0 and 10ms first, unmeasured), each level opened by one unmeasured run of its first configuration, then ` +
        `each level on every configuration ${settings.slices} time${settings.slices === 1 ? '' : 's'} interleaved ` +
        "(in the order, reversed, reversed, as at first; auto leads it in odd rounds and ends it in even ones), the mean of its slices per configuration (p99: of all its slices' requests pooled); " +
        'ratios within a round, each against the fixed delay with the best median of the other rounds (chosen on other figures than it is compared on), medians over rounds',
    ].join('\n');
  },
  round(round, model) {
    const configs = [
      ...round.order
        .filter((delay) => delay !== 'auto' && delay !== CONTROL)
        .map(Number)
        .sort((a, b) => a - b),
      CONTROL,
      'auto',
    ];
    const levels = [...new Set(round.points.map((point) => point.level))];
    const pair = (a, b, digits) => `${fixed(a, digits)} / ${fixed(b, digits)}`;
    const rows = levels.map((level) => {
      const of = (delay) => round.points.find((point) => point.level === level && point.delay === delay);
      const [auto, zero] = [of('auto'), of(0)];
      return (
        `  ${level.padEnd(7)}${configs.map((delay) => fixed(of(delay).throughput, 0).padStart(8)).join('')}` +
        `${pair(auto.p50Ms, zero.p50Ms, 2).padStart(17)}${pair(auto.p99Ms, zero.p99Ms, 1).padStart(17)}` +
        `${pair(auto.averageBatch, zero.averageBatch, 2).padStart(15)}`
      );
    });
    return [
      `\n${model.label}, round ${round.round}: req/s by max_queue_delay (open loop "rate": ${round.rate}/s)`,
      `  ${'level'.padEnd(7)}${configs.map((delay) => delayLabel(delay).padStart(8)).join('')}` +
        '  p50 ms auto / 0  p99 ms auto / 0  batch auto / 0',
      ...rows,
    ].join('\n');
  },
  simulated(model) {
    const { simulated, inProcess } = model;
    const configs = [...new Set(simulated.points.map((point) => point.delay))];
    const levels = [...new Set(simulated.points.map((point) => point.level))];
    const rows = levels.map((level) => {
      const here = simulated.points.filter((point) => point.level === level);
      const auto = here.find((point) => point.delay === 'auto');
      const best = Math.max(...here.filter((point) => point.delay !== 'auto').map((point) => point.throughput));
      const fit = auto.fitTrusted ? 'fit trusted' : `fit not trusted: ${auto.fitReason}`;
      return (
        `  ${level.padEnd(7)}${here.map((point) => fixed(point.throughput, 0).padStart(8)).join('')}` +
        `${fixed(auto.throughput / best, 3).padStart(11)}  sizes ${auto.batchSizes.join(', ')} (${fit})`
      );
    });
    return [
      `\n${model.label} on a simulated clock: the Batcher alone, one instance whose pass takes exactly ` +
        `${fixed(inProcess.c, 2)} + ${fixed(inProcess.m, 3)}·B ms (auto seeded with it as at load), clients that send ` +
        `again ${simulated.roundTripMs} ms after an answer${simulated.rate ? `, then Poisson arrivals at ${simulated.rate}/s` : ''}, ` +
        `${simulated.seconds} s (req/s)`,
      `  ${'level'.padEnd(7)}${configs.map((delay) => delayLabel(delay).padStart(8)).join('')}  auto÷best  auto's batches`,
      ...rows,
    ].join('\n');
  },
  summary(model, maxLatencyMs) {
    const { inProcess } = model;
    const verdict = (key) => {
      const { aim, met } = model.verdicts.find((each) => each.key === key);
      return `aim ${aim}: ${metOrMissed(met)}`;
    };
    const ceiling = inProcess.ceiling === null ? 'no ceiling' : `1 + c/m = ${fixed(inProcess.ceiling, 1)}×`;
    const lastRound = model.rounds.at(-1);
    const learnt = lastRound.points
      .filter((point) => point.learnt)
      .map(({ level, learnt: line }) => {
        const state = line.trusted ? 'trusted' : `not trusted (${line.notTrustedBecause})`;
        return (
          `  auto's line after ${level} (round ${lastRound.round}): ` +
          `c = ${fixed(line.fixedCostMs, 2)} ms, m = ${fixed(line.rowCostMs, 3)} ms, R² ${fixed(line.r2, 2)}, ` +
          `${line.batchSizesSeen} batch sizes, ${state}, last wait ${fixed(line.lastWaitMs, 2)} ms` +
          `, admission limit ${admissionLimit(line)}`
        );
      });
    return [
      `\n${model.label} (max_batch_size ${model.maxBatchSize}; in process c = ${fixed(inProcess.c, 2)} ms, ` +
        `m = ${fixed(inProcess.m, 3)} ms, ${ceiling}):`,
      ...model.perLevel.map(
        ({
          level,
          bestStaticDelayUs,
          bestElsewhereUs,
          batches,
          throughputRatio,
          throughputRatios,
          autoP99Ms,
          autoRefused,
          autoInFlight,
          zeroP99Ms,
        }) =>
          `  ${level.padEnd(6)} auto ÷ best fixed delay (${delayLabel(bestStaticDelayUs)}) ${fixed(throughputRatio, 3)} ` +
          `(rounds ${ratioList(throughputRatios)} against ${bestElsewhereUs.map(delayLabel).join(', ')}, each the best of the other rounds; ` +
          `${verdict(`throughput ${level}`)}); batch auto ${fixed(batches.auto, 1)}, 0 ${fixed(batches.zero, 1)}, ` +
          `best ${fixed(batches.best, 1)}; auto p99 ${fixed(autoP99Ms, 1)} ms (${verdict(`p99 ${level}`)}; ` +
          `delay 0: ${fixed(zeroP99Ms, 1)} ms); auto refused ${fixed(100 * autoRefused, 1)} %, ` +
          `${fixed(autoInFlight, 1)} requests in flight (Little's law)`,
      ),
      `  auto p50 ÷ delay-0 p50 at c=1: ${fixed(model.p50Ratio, 3)} (rounds ${ratioList(model.p50Ratios)}; ` +
        `${verdict('p50 c=1')})`,
      ...this.control(model),
      `  noise: at ${model.noise.level}, where every configuration forms the same full batches, throughput ranged ` +
        `${fixed(model.noise.throughput[0], 0)}–${fixed(model.noise.throughput[1], 0)} req/s and compute ` +
        `${fixed(model.noise.computeMs[0], 2)}–${fixed(model.noise.computeMs[1], 2)} ms a request over the configurations and rounds`,
      this.budget(model, maxLatencyMs),
      ...learnt,
    ].join('\n');
  },
  /**
   * The yardstick: delay 0 measured twice in every slice, the second's throughput (and p50 at
   * concurrency 1) over the first's, per level and round.
   */
  control(model) {
    const spread = (values) => `${fixed(Math.min(...values), 2)}–${fixed(Math.max(...values), 2)}`;
    const all = model.perLevel.flatMap(({ controlRatios }) => controlRatios);
    return [
      `  delay 0 against itself ("0 again" ÷ 0, the same configuration twice in every slice): throughput ` +
        model.perLevel.map(({ level, controlRatios }) => `${level} ${ratioList(controlRatios)}`).join('; ') +
        `; p50 at c=1 ${ratioList(model.controlP50Ratios)}. Over all levels and rounds ${spread(all)}: ` +
        `${all.filter((ratio) => ratio < model.aims.throughputRatio).length} of ${all.length} below the aim's ${model.aims.throughputRatio}`,
    ];
  },
  /**
   * Where the aims can be met together: per level, the rounds in which some fixed delay's p99
   * held max_latency, and auto's throughput over the best such delay's there. Where none did,
   * holding the budget meant answering less than they did, so the throughput aim and the p99
   * aim pull apart (benchmarks/adaptive-feasibility.js asks how far on a simulated core).
   */
  budget(model, maxLatencyMs) {
    const levels = [...new Set(model.rounds[0].points.map((point) => point.level))];
    const parts = levels.map((level) => {
      const ratios = [];
      let autoWithin = 0;
      for (const round of model.rounds) {
        const here = round.points.filter((point) => point.level === level);
        const auto = here.find((point) => point.delay === 'auto');
        const held = here.filter((point) => typeof point.delay === 'number' && point.p99Ms <= maxLatencyMs);
        if (held.length === 0) {
          if (auto.p99Ms <= maxLatencyMs) autoWithin += 1;
          continue;
        }
        ratios.push(auto.throughput / Math.max(...held.map((point) => point.throughput)));
      }
      const none = model.rounds.length - ratios.length;
      return (
        `${level} ${ratios.length} of ${model.rounds.length}` +
        (ratios.length > 0 ? ` (${ratioList(ratios)})` : '') +
        (none > 0 ? ` (auto held it in ${autoWithin} of the ${none} where none did)` : '')
      );
    });
    return (
      `  rounds in which a fixed delay's p99 held max_latency ${maxLatencyMs} ms (auto ÷ the best such delay there): ` +
      parts.join('; ')
    );
  },
  render(result) {
    const parts = [this.header(result)];
    for (const model of result.models) {
      parts.push(
        ...model.rounds.map((round) => this.round(round, model)),
        this.simulated(model),
        this.summary(model, result.settings.maxLatencyMs),
      );
    }
    return parts.join('\n');
  },
};

export const ocrPipeline = {
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

/** Each results/<name>.json's renderer, by name: the names the docs' markers use. */
export const renderers = {
  'ocr-pipeline': (result) => ocrPipeline.render(result),
  adaptive: (result) => adaptive.render(result),
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
    return [this.header(result), ...result.rounds.map((round) => this.round(round)), this.summary(result)].join('\n');
  },
};
