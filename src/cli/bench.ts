import { readFile, writeFile } from 'node:fs/promises';
import { BenchGateError, UsageError } from '../core/errors.js';
import { checkGate, parseFailOn, parseRegression } from '../bench/gate.js';
import { measureInProcess, powersOfTwoUpTo } from '../bench/in-process.js';
import { buildReport } from '../bench/report.js';
import { renderHtml } from '../bench/report-html.js';
import { renderCsv, renderMarkdown, renderTable } from '../bench/report-table.js';
import { grpcTarget, isGrpcProtocol, isGrpcUrl } from '../bench/grpc-channel.js';
import { formatDelay, parseDelay } from '../bench/delay.js';
import type { PlanTarget } from '../bench/plan.js';
import type { BenchReport, LoadLevel, PointResult, Protocol, RateSearchResult } from '../bench/report-types.js';
import { runPlainHttp, type PlainHttpProgress } from '../bench/plain-http.js';
import { runSweep, type BatchTimeSample, type SweepOptions, type SweepProgress } from '../bench/sweep.js';
import { ArchiveTarget, RemoteTarget, type BenchTarget } from '../bench/targets.js';
import { durationOption, integerOption } from './options.js';
import { managementToken } from './management-client.js';
import { startSpinner } from './spinner.js';
import { runOpenAiBench } from './bench-openai.js';
import { readTlsClient, type TlsClientOptions } from './tls-options.js';
import type { ClientTls } from '../core/client-tls.js';
import type { OpenAiApi } from '../bench/openai-load.js';

export interface BenchCommandOptions extends TlsClientOptions {
  url?: string;
  model?: string;
  managementUrl?: string;
  token?: string;
  tokenFile?: string;
  inProcess: boolean;
  concurrency?: string[];
  rate?: string[];
  arrival: 'poisson' | 'constant';
  batchSizes?: string[];
  delays?: string[];
  instances?: string[];
  protocol?: Protocol;
  clientBatch: string;
  input?: string;
  inputPool: string;
  contentType?: string;
  duration: string;
  requests?: string;
  window: string;
  warmup: string;
  stability: string;
  workers: string;
  sloP99?: string;
  plan: boolean;
  targetRate?: string;
  json?: string;
  csv?: string;
  md?: string;
  html?: string;
  failOn?: string;
  baseline?: string;
  maxRegression: string;
  pin: boolean;
  device?: string;
  openai?: OpenAiApi;
  maxTokens: string;
  tokenDistribution: 'uniform' | 'log-uniform';
  prompt: string;
}

export async function runBench(archive: string | undefined, options: BenchCommandOptions): Promise<void> {
  if (options.openai) {
    await runOpenAiBench(archive, { ...options, openai: options.openai });
    return;
  }
  if (archive && options.url) throw new UsageError('give either an archive or --url, not both');
  if (!archive && !options.url)
    throw new UsageError('give an archive to serve, or --url and --model of a running server');
  if (options.url && !options.model && options.protocol !== 'http-json') {
    throw new UsageError('--url needs --model');
  }
  const protocol = benchProtocol(options.protocol, options.url);
  checkPlainHttp(protocol, archive, options);
  if (options.inProcess && !archive) throw new UsageError('--in-process needs an archive');
  const levels = loadLevels(options);
  if (levels.length === 0 && !options.inProcess && !options.plan) {
    throw new UsageError('give load levels: --concurrency 1,4,16 or --rate 200,400 (or --in-process, or --plan)');
  }
  const rules = options.failOn ? parseFailOn(options.failOn) : [];
  const baseline = options.baseline ? await readBaseline(options.baseline) : undefined;
  const sloP99Ms = options.sloP99 === undefined ? undefined : millis(options.sloP99, '--slo-p99');
  const plan = planTarget(options, sloP99Ms);
  const tls = await readTlsClient(options);
  if (tls && archive) throw new UsageError('--tls-ca, --tls-cert and --tls-key are for a server at --url');

  const spinner = startSpinner('starting');
  let inProcessSamples: BatchTimeSample[] | undefined;
  let points: PointResult[] = [];
  let serverSamples: BatchTimeSample[] = [];
  let searches: RateSearchResult[] = [];
  let target: BenchTarget | undefined;
  try {
    if (options.inProcess && archive) {
      spinner.text = 'measuring T(B) in process';
      const largest = options.batchSizes ? Math.max(...integers(options.batchSizes, '--batch-sizes', 1)) : undefined;
      inProcessSamples = await measureInProcess(archive, {
        rounds: 7,
        iterations: 5,
        warmupIterations: 3,
        ...(options.device ? { device: options.device } : {}),
        ...(largest !== undefined ? { batchSizes: powersOfTwoUpTo(largest) } : {}),
      });
    }
    if (protocol === 'http-json') {
      points = await runPlainHttp({
        url: options.url as string,
        inputFile: options.input as string,
        contentType: options.contentType ?? 'application/json',
        rows: integerOption(options.clientBatch, '--client-batch', 1),
        levels,
        load: loadOptions(options, tls),
        onProgress: (progress) => (spinner.text = progressText(progress)),
      });
    } else if (levels.length > 0 || plan) {
      target = archive
        ? await ArchiveTarget.open(archive, {
            pin: options.pin,
            grpc: isGrpcProtocol(protocol),
            ...(options.device ? { device: options.device } : {}),
          })
        : new RemoteTarget(options.url as string, options.model as string, await managementOf(options), tls);
      const result = await runSweep(target, {
        ...(options.batchSizes ? { batchSizes: integers(options.batchSizes, '--batch-sizes', 0) } : {}),
        ...(options.delays ? { delays: options.delays.map(delayOption) } : {}),
        ...(options.instances ? { instances: integers(options.instances, '--instances', 1) } : {}),
        levels,
        protocol,
        clientBatch: integerOption(options.clientBatch, '--client-batch', 1),
        ...(options.input ? { inputFile: options.input } : {}),
        inputPool: integerOption(options.inputPool, '--input-pool', 1),
        ...(plan ? { plan: { ...plan, arrival: options.arrival, ...PLAN_SEARCH } } : {}),
        load: loadOptions(options, tls),
        onProgress: (progress) => (spinner.text = progressText(progress)),
      });
      points = result.points;
      serverSamples = result.samples;
      searches = result.searches;
    }
  } finally {
    spinner.stop();
    if (target instanceof RemoteTarget) {
      const restored = await target.restore();
      if (restored) process.stderr.write(`bench: put ${target.model} back as found: ${describePoint(restored)}\n`);
    }
    await target?.close();
  }

  const report = buildReport({
    target: {
      ...(options.url ? { url: options.url } : {}),
      ...(archive ? { archive } : {}),
      model: target?.model ?? options.model ?? archive ?? options.url ?? '',
      protocol,
    },
    points,
    serverSamples,
    ...(inProcessSamples ? { inProcessSamples } : {}),
    ...(sloP99Ms !== undefined ? { sloP99Ms } : {}),
    ...(plan ? { plan: { ...plan, searches } } : {}),
  });
  process.stdout.write(`${renderTable(report)}\n`);
  await writeReports(report, options);

  const violations = checkGate(report, rules, baseline, baseline ? parseRegression(options.maxRegression) : undefined);
  if (violations.length > 0) throw new BenchGateError(`bench gate failed: ${violations.join('; ')}`);
}

async function writeReports(report: BenchReport, options: BenchCommandOptions): Promise<void> {
  const outputs: [string | undefined, () => string][] = [
    [options.json, () => `${JSON.stringify(report, null, 2)}\n`],
    [options.csv, () => renderCsv(report)],
    [options.md, () => renderMarkdown(report)],
    [options.html, () => renderHtml(report)],
  ];
  for (const [file, render] of outputs) {
    if (!file) continue;
    await writeFile(file, render());
    process.stderr.write(`wrote ${file}\n`);
  }
}

/** How each load level runs: the same for a sweep and for a plain HTTP server. */
function loadOptions(options: BenchCommandOptions, tls: ClientTls | undefined): SweepOptions['load'] {
  const windowMs = millis(options.window, '--window');
  return {
    warmupMs: millis(options.warmup, '--warmup'),
    windowMs,
    minWindows: 3,
    maxWindows: Math.max(3, Math.ceil(millis(options.duration, '--duration') / windowMs)),
    stabilityPct: parseRegression(options.stability),
    requestTimeoutMs: 60_000,
    workers: integerOption(options.workers, '--workers', 1),
    ...(options.requests ? { maxRequests: integerOption(options.requests, '--requests', 1) } : {}),
    ...(tls ? { tls } : {}),
  };
}

/**
 * `--protocol http-json` drives any HTTP server with the `--input` file as it is: bench can
 * neither serve an archive that way nor see or change the server's settings, so the flags
 * that would need to are refused rather than ignored.
 */
function checkPlainHttp(protocol: Protocol, archive: string | undefined, options: BenchCommandOptions): void {
  if (protocol !== 'http-json') {
    if (options.contentType !== undefined) throw new UsageError('--content-type is for --protocol http-json');
    return;
  }
  if (archive) throw new UsageError('--protocol http-json drives a server at --url, not an archive');
  if (!options.input) throw new UsageError('--protocol http-json sends a file as it is: give --input FILE');
  const refused = [
    ['--batch-sizes', options.batchSizes],
    ['--delays', options.delays],
    ['--instances', options.instances],
    ['--management-url', options.managementUrl],
    ['--slo-p99', options.sloP99],
    ['--plan', options.plan || undefined],
    ['--input-pool', options.inputPool === '1' ? undefined : options.inputPool],
  ]
    .filter(([, value]) => value !== undefined)
    .map(([flag]) => flag);
  if (refused.length > 0) {
    throw new UsageError(
      `--protocol http-json cannot see or change a plain HTTP server's settings, so it takes no ${refused.join(', ')}; ` +
        'bench batchserve with them, and the other server at its own settings',
    );
  }
}

function loadLevels(options: BenchCommandOptions): LoadLevel[] {
  return [
    ...integers(options.concurrency ?? [], '--concurrency', 1).map((concurrency): LoadLevel => ({
      kind: 'concurrency',
      concurrency,
    })),
    ...(options.rate ?? []).map((value): LoadLevel => ({
      kind: 'rate',
      rate: positiveRate(value, '--rate'),
      arrival: options.arrival,
    })),
  ];
}

/**
 * The protocol given, or the one the URL implies; gRPC needs a grpc:// URL and REST an http
 * one. An archive's server listens for both.
 */
function benchProtocol(given: Protocol | undefined, url: string | undefined): Protocol {
  if (url === undefined) return given ?? 'v2-binary';
  if (!/^(https?|grpcs?):\/\//i.test(url)) {
    throw new UsageError(`--url ${url}: expected http://host:port or grpc://host:port (https://, grpcs:// with TLS)`);
  }
  // A grpc:// URL must name its port: grpcTarget refuses it otherwise.
  if (isGrpcUrl(url)) grpcTarget(url);
  const protocol = given ?? (isGrpcUrl(url) ? 'grpc' : 'v2-binary');
  if (isGrpcProtocol(protocol) && !isGrpcUrl(url)) {
    throw new UsageError(
      `--protocol ${protocol} sends gRPC: give the server's grpc://host:port (grpcs:// with TLS) as --url, not ${url}`,
    );
  }
  if (!isGrpcProtocol(protocol) && isGrpcUrl(url)) {
    throw new UsageError(
      `--protocol ${protocol} sends HTTP: give the server's http:// (or https://) inference URL, not ${url}`,
    );
  }
  return protocol;
}

/** The management API to reconfigure a --url server through, with the token the other management commands use. */
async function managementOf(options: BenchCommandOptions): Promise<{ url: string; token?: string } | undefined> {
  if (!options.managementUrl) return undefined;
  const { token, file } = await managementToken(options);
  // Said because a token read from a file left by another server is a puzzling 401.
  if (file !== undefined) process.stderr.write(`bench: management token from ${file}\n`);
  return { url: options.managementUrl, ...(token ? { token } : {}) };
}

async function readBaseline(file: string): Promise<BenchReport> {
  try {
    const report = JSON.parse(await readFile(file, 'utf8')) as BenchReport;
    if (report.schemaVersion !== 1) throw new Error(`schemaVersion ${String(report.schemaVersion)}`);
    return report;
  } catch (error) {
    throw new UsageError(`--baseline ${file} is not a bench --json report: ${(error as Error).message}`);
  }
}

/**
 * `--plan`'s rate search: up to 8 probes per configuration, until the highest sustained rate
 * and the lowest failed one are within 10 % (rate-search.ts).
 */
const PLAN_SEARCH = { maxProbes: 8, resolution: 0.1 } as const;

/** `--plan --target-rate R --slo-p99 D`: all three or none. */
function planTarget(options: BenchCommandOptions, sloP99Ms: number | undefined): PlanTarget | undefined {
  if (!options.plan) {
    if (options.targetRate !== undefined) throw new UsageError('--target-rate needs --plan');
    return undefined;
  }
  if (options.targetRate === undefined || sloP99Ms === undefined) {
    throw new UsageError('--plan needs --target-rate (requests per second in all) and --slo-p99 (the p99 budget)');
  }
  return { targetRate: positiveRate(options.targetRate, '--target-rate'), sloP99Ms };
}

function positiveRate(value: string, flag: string): number {
  const rate = Number(value);
  if (value.trim() === '' || !Number.isFinite(rate) || rate <= 0) {
    throw new UsageError(`${flag}: expected requests per second, got "${value}"`);
  }
  return rate;
}

function delayOption(value: string): number | 'auto' {
  const delay = parseDelay(value);
  if (delay === undefined) {
    throw new UsageError(`--delays: expected a duration such as 0, 500us, 2ms, or auto, got "${value}"`);
  }
  return delay;
}

/** A server configuration as config files spell it. */
function describePoint(point: { maxBatchSize: number; maxQueueDelayUs: number | 'auto'; instances: number }): string {
  return `max_batch_size ${point.maxBatchSize}, max_queue_delay ${formatDelay(point.maxQueueDelayUs)}, ${point.instances} instance${point.instances === 1 ? '' : 's'}`;
}

/** A plain HTTP server's progress has no server settings to show. */
function progressText(progress: SweepProgress | PlainHttpProgress): string {
  const { level, pointIndex, pointCount, throughput, p99Ms } = progress;
  const { server, probe } = 'server' in progress ? progress : {};
  const load = level.kind === 'concurrency' ? `concurrency ${level.concurrency}` : `${level.rate}/s ${level.arrival}`;
  const live = throughput === undefined ? '' : ` — ${throughput.toFixed(0)} req/s, p99 ${(p99Ms ?? 0).toFixed(2)} ms`;
  const step = probe ? `rate search ${probe.index}/≤${probe.max}` : `${pointIndex + 1}/${pointCount}`;
  const settings = server
    ? `B=${server.maxBatchSize} delay ${formatDelay(server.maxQueueDelayUs)} ×${server.instances}, `
    : '';
  return `[${step}] ${settings}${load}${live}`;
}

function integers(values: readonly string[], flag: string, min: number): number[] {
  return values.map((value) => integerOption(value, flag, min));
}

function millis(value: string, flag: string): number {
  return durationOption(value, flag) / 1000;
}
