import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readArchiveContents } from '../archive/read.js';
import { openArchive } from '../archive/source.js';
import { Agent } from 'undici';
import type { ClientTls } from '../core/client-tls.js';
import { ModelLoadError, UsageError } from '../core/errors.js';
import { SERVING_NODE_FLAGS } from '../core/serving-node-flags.js';
import type { ModelStatsJson } from '../metrics/model-statistics.js';
import { delayParameter } from './delay.js';
import { waitForStartupUrls } from '../server/startup-block.js';
import { isGrpcUrl } from './grpc-channel.js';
import { GrpcModelQueries } from './grpc-model-queries.js';
import { getJson, RestModelQueries, type ModelQueries } from './model-queries.js';
import type { ModelMetadata } from './payload.js';
import type { ServerPoint } from './report-types.js';

/** The server a bench drives: it can be put into a sweep point and asked for statistics. */
export interface BenchTarget {
  readonly model: string;
  /** Where the load goes: the REST inference API (`http://…`), or the gRPC one (`grpc://host:port`). */
  readonly inferenceUrl: string;
  metadata(): Promise<ModelMetadata>;
  /** The configuration the server has now, for a bench without a sweep. */
  current(): Promise<ServerPoint>;
  apply(point: ServerPoint): Promise<void>;
  /** Every loaded version's statistics; served-version.ts picks the one that served. */
  stats(): Promise<readonly ModelStatsJson[]>;
  close(): Promise<void>;
}

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

/**
 * A server someone else runs: asked about its model on the API the load goes to (REST or
 * gRPC); sweeps reconfigure it through its management API, which is REST.
 */
export class RemoteTarget implements BenchTarget {
  readonly #queries: ModelQueries;
  readonly #management: { url: string; token?: string } | undefined;
  /** With `tls`: the REST calls' connections, trusting and presenting its files. */
  readonly #dispatcher: Agent | undefined;
  /** The configuration found before the sweep's first change, to put back at the end. */
  #found: ServerPoint | undefined;

  constructor(
    readonly inferenceUrl: string,
    readonly model: string,
    management?: { url: string; token?: string },
    tls?: ClientTls,
  ) {
    this.#dispatcher = tls ? new Agent({ connect: tls }) : undefined;
    this.#queries = isGrpcUrl(inferenceUrl)
      ? new GrpcModelQueries(inferenceUrl, model, tls)
      : new RestModelQueries(inferenceUrl, model, this.#dispatcher);
    this.#management = management;
  }

  metadata(): Promise<ModelMetadata> {
    return this.#queries.metadata();
  }

  current(): Promise<ServerPoint> {
    return this.#queries.config();
  }

  async apply(point: ServerPoint): Promise<void> {
    if (!this.#management) {
      const current = await this.current();
      const unchanged = (Object.keys(point) as (keyof ServerPoint)[]).every((key) => point[key] === current[key]);
      if (unchanged) return;
      throw new UsageError(
        'sweeping batch sizes, delays or instances needs --management-url (and the token serve wrote, read from ./batchserve.key unless --token-file says where)',
      );
    }
    this.#found ??= await this.current();
    await this.#put(this.#management, point);
  }

  /**
   * Puts the server back as the sweep found it (someone else's server must not stay at the
   * last point swept); returns what it restored, or undefined when nothing had changed.
   */
  async restore(): Promise<ServerPoint | undefined> {
    const found = this.#found;
    if (!found || !this.#management) return undefined;
    this.#found = undefined;
    await this.#put(this.#management, found);
    return found;
  }

  async #put(management: { url: string; token?: string }, point: ServerPoint): Promise<void> {
    // max_batch_delay is in milliseconds, TorchServe's unit.
    const query = `batch_size=${point.maxBatchSize}&max_batch_delay=${delayParameter(point.maxQueueDelayUs)}&min_worker=${point.instances}`;
    await getJson(`${management.url}/models/${encodeURIComponent(this.model)}?${query}`, {
      method: 'PUT',
      ...(management.token ? { token: management.token } : {}),
      ...(this.#dispatcher ? { dispatcher: this.#dispatcher } : {}),
    });
  }

  stats(): Promise<readonly ModelStatsJson[]> {
    return this.#queries.stats();
  }

  async close(): Promise<void> {
    this.#queries.close();
    await this.#dispatcher?.close();
  }
}

export interface ArchiveTargetOptions {
  /** Pin the server to CPU 0 and this process to the others (taskset), so they don't compete. */
  readonly pin: boolean;
  readonly device?: string;
  /** Send the load to the server's gRPC port instead of its REST one. */
  readonly grpc?: boolean;
}

/**
 * An archive the bench serves itself: a fresh `batchserve serve` child for every sweep point,
 * so no point inherits another's queues, warm caches or instances.
 */
export class ArchiveTarget implements BenchTarget {
  #child: ChildProcess | undefined;
  #remote: RemoteTarget | undefined;
  #grpcUrl = '';
  #defaults: ServerPoint | undefined;
  readonly #archive: string;
  readonly #workDir: string;
  readonly #options: ArchiveTargetOptions;

  private constructor(
    archive: string,
    readonly model: string,
    workDir: string,
    options: ArchiveTargetOptions,
  ) {
    this.#archive = archive;
    this.#workDir = workDir;
    this.#options = options;
  }

  static async open(archive: string, options: ArchiveTargetOptions): Promise<ArchiveTarget> {
    const source = await openArchive(archive);
    const { manifest, config } = await readArchiveContents(source).finally(() => source.close());
    const target = new ArchiveTarget(
      archive,
      manifest.model.modelName,
      await mkdtemp(join(tmpdir(), 'batchserve-bench-')),
      options,
    );
    target.#defaults = {
      maxBatchSize: config.max_batch_size ?? 0,
      maxQueueDelayUs: config.dynamic_batching.max_queue_delay,
      instances: config.instances.reduce((total, group) => total + group.count, 0),
    };
    if (options.pin) pinSelf();
    return target;
  }

  get inferenceUrl(): string {
    if (!this.#remote) throw new UsageError('the bench server is not running');
    return this.#options.grpc ? this.#grpcUrl : this.#remote.inferenceUrl;
  }

  metadata(): Promise<ModelMetadata> {
    if (!this.#remote) throw new UsageError('the bench server is not running');
    return this.#remote.metadata();
  }

  current(): Promise<ServerPoint> {
    return Promise.resolve(this.#defaults as ServerPoint);
  }

  async apply(point: ServerPoint): Promise<void> {
    await this.#stopChild();
    const keyFile = join(this.#workDir, 'management.key');
    const args = [
      BIN,
      'serve',
      '--models',
      `${this.model}=${this.#archive}`,
      '--port',
      '0',
      '--management-port',
      '0',
      '--metrics-port',
      '0',
      '--grpc-port',
      '0',
      '--key-file',
      keyFile,
      '--log-level',
      'error',
      ...(this.#options.device ? ['--device', this.#options.device] : []),
    ];
    const [command, commandArgs] =
      this.#options.pin && hasTaskset()
        ? ['taskset', ['-c', '0', process.execPath, ...SERVING_NODE_FLAGS, ...args]]
        : [process.execPath, [...SERVING_NODE_FLAGS, ...args]];
    const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    const urls = await waitForStartupUrls(child, 'the bench server');
    if (this.#options.grpc && !urls.grpc) throw new ModelLoadError('the bench server named no gRPC address');
    this.#grpcUrl = urls.grpc;
    this.#remote = new RemoteTarget(urls.inference, this.model, {
      url: urls.management,
      token: (await readFile(keyFile, 'utf8')).trim(),
    });
    await this.#remote.apply(point);
  }

  stats(): Promise<readonly ModelStatsJson[]> {
    if (!this.#remote) throw new UsageError('the bench server is not running');
    return this.#remote.stats();
  }

  async close(): Promise<void> {
    await this.#stopChild();
    await rm(this.#workDir, { recursive: true, force: true });
  }

  async #stopChild(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    await this.#remote?.close();
    this.#remote = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

function hasTaskset(): boolean {
  return spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Moves this process (every thread) off CPU 0, which the server gets. */
function pinSelf(): void {
  if (!hasTaskset()) return;
  spawnSync('taskset', ['-a', '-p', '-c', '1-1023', String(process.pid)], { stdio: 'ignore' });
}
