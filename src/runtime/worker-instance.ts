import { Worker } from 'node:worker_threads';
import type { BatchRunner } from '../batching/batch-runner.js';
import type { CompleteModelConfig } from '../config/model-config.js';
import { HandlerInvalidError, HandlerLoadTimeoutError, InferenceFailedError } from '../core/errors.js';
import type { InstanceSpec } from './open-instance.js';
import {
  buffersOf,
  fromWireError,
  fromWireResponse,
  toWireRequest,
  type WireError,
  type WireRequest,
  type WireResponse,
} from './worker-protocol.js';
import type { BatchTimings, HandlerRequest } from '../core/request.js';
import type { GenerationEvents, GenerationSubmission } from './generation-engine.js';
import type { GenerationChannel, GenerationListener } from './generator.js';
import type { DecoderFindings } from './open-generation.js';

type WorkerMessage =
  | { type: 'importing-handler' | 'imported-handler' }
  | { type: 'ready'; config: CompleteModelConfig; device: string; deviceNote?: string; decoder?: DecoderFindings }
  | { type: 'failed'; error: WireError }
  | { type: 'result'; id: number; responses?: WireResponse[]; timings?: BatchTimings; error?: WireError }
  | { type: 'generation'; events: GenerationEvents };

/** What the server sends an instance's worker. */
export type InstanceCommand =
  | { type: 'run'; id: number; requests: WireRequest[] }
  | { type: 'generate'; submission: GenerationSubmission }
  | { type: 'cancel'; id: number }
  | { type: 'close' };

interface Waiting {
  resolve(result: { responses: unknown[]; timings: BatchTimings }): void;
  reject(error: unknown): void;
}

/**
 * A model instance living in its own worker thread; batches go there and answers come back.
 * A text-generation instance's engine runs there too: sequences go in, each step's events
 * come back.
 */
export class WorkerInstance implements BatchRunner, GenerationChannel {
  /** The worker takes messages in turn: a batch sent while one runs starts as soon as it ends. */
  readonly queuesBatches = true;
  #nextId = 0;
  readonly #waiting = new Map<number, Waiting>();
  #failure: Error | undefined;
  #stoppedListener: ((error: Error) => void) | undefined;
  #generationListener: GenerationListener | undefined;
  #exited = false;
  readonly #worker: Worker;

  private constructor(
    readonly id: string,
    readonly device: string,
    worker: Worker,
    readonly decoder: DecoderFindings | undefined,
  ) {
    this.#worker = worker;
    worker.on('message', (message: WorkerMessage) => {
      if (message.type === 'generation') this.#generationListener?.events(message.events);
      if (message.type !== 'result') return;
      const waiting = this.#waiting.get(message.id);
      this.#waiting.delete(message.id);
      if (message.error) waiting?.reject(fromWireError(message.error));
      else
        waiting?.resolve({
          responses: (message.responses ?? []).map(fromWireResponse),
          timings: message.timings as BatchTimings,
        });
    });
    const fail = (error: Error): void => {
      if (this.#failure) return;
      this.#failure = new InferenceFailedError(`instance ${id} stopped: ${error.message}`);
      for (const waiting of this.#waiting.values()) waiting.reject(this.#failure);
      this.#waiting.clear();
      this.#generationListener?.stopped(this.#failure);
      this.#stoppedListener?.(this.#failure);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      this.#exited = true;
      fail(new Error(`its worker thread exited with code ${code}`));
    });
  }

  /**
   * Starts the worker and resolves once the instance is open, checked and warmed up. The
   * handler's import alone is timed (`handler_load_timeout`): opening a session may rightly take
   * minutes (a TensorRT build), an import that long is a handler stuck at its top level, and
   * terminating the worker stops it.
   */
  static async start(
    id: string,
    spec: InstanceSpec,
  ): Promise<{ instance: WorkerInstance; config: CompleteModelConfig; deviceNote?: string }> {
    const worker = new Worker(new URL('./worker-main.js', import.meta.url), { workerData: { ...spec, id } });
    let importTimer: NodeJS.Timeout | undefined;
    const timeoutMs = spec.config.handler_load_timeout / 1000;
    // Only these listeners go afterwards: removeAllListeners would also drop the worker's own
    // wiring of its message port, and no answer to a batch would ever arrive.
    let onMessage: ((message: WorkerMessage) => void) | undefined;
    let onError: ((error: Error) => void) | undefined;
    let onExit: ((code: number) => void) | undefined;
    const ready = await new Promise<Extract<WorkerMessage, { type: 'ready' }>>((resolve, reject) => {
      onMessage = (message) => {
        if (message.type === 'importing-handler') {
          importTimer = setTimeout(
            () =>
              reject(
                new HandlerLoadTimeoutError(
                  `instance ${id}: handler ${spec.handler} did not finish importing within ${timeoutMs} ms (handler_load_timeout); the import was stopped`,
                ),
              ),
            timeoutMs,
          );
        } else if (message.type === 'imported-handler') {
          clearTimeout(importTimer);
          importTimer = undefined;
        } else if (message.type === 'ready') resolve(message);
        else if (message.type === 'failed') reject(fromWireError(message.error));
      };
      onError = reject;
      onExit = (code) =>
        reject(
          importTimer
            ? new HandlerInvalidError(`handler ${spec.handler} called process.exit(${code}) while being imported`)
            : new InferenceFailedError(`instance ${id} exited with code ${code} while loading`),
        );
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
    })
      .catch(async (error: unknown) => {
        await worker.terminate();
        throw error;
      })
      .finally(() => {
        clearTimeout(importTimer);
        if (onMessage) worker.off('message', onMessage);
        if (onError) worker.off('error', onError);
        if (onExit) worker.off('exit', onExit);
      });
    return {
      instance: new WorkerInstance(id, ready.device, worker, ready.decoder),
      config: ready.config,
      ...(ready.deviceNote ? { deviceNote: ready.deviceNote } : {}),
    };
  }

  /**
   * A batch of one request whose buffers nothing else holds moves them into the worker
   * (transfer); they are unusable here afterwards. A batch of several is copied (structured
   * clone): if it fails, the batcher runs each request alone, and needs their data for that.
   */
  run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    const wire = requests.map(toWireRequest);
    const only = wire[0];
    const first = requests[0];
    const movable = first !== undefined && first.kind !== 'texts' && first.movable;
    const transfer = wire.length === 1 && only && movable ? buffersOf(only) : [];
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#post({ type: 'run', id, requests: wire }, transfer);
    });
  }

  submitGeneration(submission: GenerationSubmission): void {
    if (this.#failure) throw this.#failure;
    this.#post({ type: 'generate', submission });
  }

  cancelGeneration(id: number): void {
    if (!this.#failure) this.#post({ type: 'cancel', id });
  }

  listenGeneration(listener: GenerationListener): void {
    this.#generationListener = listener;
  }

  #post(command: InstanceCommand, transfer: ArrayBuffer[] = []): void {
    this.#worker.postMessage(command, transfer);
  }

  /** Called once if the worker stops on its own (an uncaught error, process.exit in a handler). */
  onStopped(listener: (error: Error) => void): void {
    this.#stoppedListener = listener;
  }

  async release(): Promise<void> {
    this.#stoppedListener = undefined;
    if (this.#exited) return;
    this.#worker.removeAllListeners('exit');
    const exited = new Promise<void>((resolve) => this.#worker.once('exit', () => resolve()));
    this.#post({ type: 'close' });
    await exited;
  }
}
