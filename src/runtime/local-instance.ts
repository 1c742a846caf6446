import type ort from 'onnxruntime-node';
import type { BatchRunner } from '../batching/batch-runner.js';
import { BatchserveError, InferenceFailedError } from '../core/errors.js';
import { runBatchTimed } from '../handlers/lifecycle.js';
import type { Handler, HandlerContext } from '../handlers/types.js';
import { answerOf, handlerRequestOf } from '../handlers/ort-tensors.js';
import type { BatchTimings, HandlerRequest } from '../core/request.js';
import type { GenerationEngine, GenerationSubmission } from './generation-engine.js';
import type { GenerationChannel, GenerationListener } from './generator.js';
import type { DecoderFindings } from './open-generation.js';

/** An instance the repository can serve with and free: in this thread or in a worker. */
export type ServingInstance = BatchRunner & {
  release(): Promise<void>;
  /** Instances that can die on their own (in a worker) report it, so they can be replaced. */
  onStopped?(listener: (error: Error) => void): void;
  /** A text-generation instance: how its decoder is batched and the context it serves. */
  readonly decoder?: DecoderFindings;
} & Partial<GenerationChannel>;

/** An instance whose engine generates: a text-generation archive's, in this thread or a worker. */
export function generatesText(instance: ServingInstance): instance is ServingInstance & GenerationChannel {
  return instance.decoder !== undefined && instance.submitGeneration !== undefined;
}

/**
 * One onnxruntime session on one device, running one batch at a time through the handler, in
 * the thread that calls it: the server's (`runtime.thread: main`) or an instance worker's
 * (worker-main.ts; the server's side of that one is `WorkerInstance`). It
 * does not queue batches (`queuesBatches`): on this thread the batcher hears the end of a
 * batch in the same turn and sends the next at once, so there is no hop to hide, and a batch
 * kept in the queue can still time out or be overtaken by a higher priority.
 */
export class LocalInstance implements ServingInstance, GenerationChannel {
  readonly #handler: Handler;
  readonly #context: HandlerContext;
  readonly #generation: { readonly engine: GenerationEngine; readonly decoder: DecoderFindings } | undefined;

  constructor(
    readonly id: string,
    readonly device: string,
    readonly session: ort.InferenceSession,
    handler: Handler,
    context: HandlerContext,
    generation?: { readonly engine: GenerationEngine; readonly decoder: DecoderFindings },
  ) {
    this.#handler = handler;
    this.#context = context;
    this.#generation = generation;
  }

  get decoder(): DecoderFindings | undefined {
    return this.#generation?.decoder;
  }

  submitGeneration(submission: GenerationSubmission): void {
    this.#engine().submit(submission);
  }

  cancelGeneration(id: number): void {
    this.#engine().cancel(id);
  }

  listenGeneration(listener: GenerationListener): void {
    this.#engine().listen((events) => listener.events(events));
  }

  #engine(): GenerationEngine {
    if (!this.#generation) throw new InferenceFailedError(`instance ${this.id} does not generate text`);
    return this.#generation.engine;
  }

  /** A batch from this thread: its tensors become onnxruntime's for the handler, and the answers' plain again. */
  async run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    const { responses, timings } = await this.runHandler(requests.map(handlerRequestOf));
    return { responses: responses.map(answerOf), timings };
  }

  /** A batch as the handler takes it (a worker builds it straight from the wire); the handler's answers as given. */
  async runHandler(
    requests: readonly HandlerRequest<ort.Tensor>[],
  ): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    try {
      return await runBatchTimed(this.#handler, requests, this.#context);
    } catch (error) {
      if (error instanceof BatchserveError) throw error;
      // A handler's or onnxruntime's own exception: the client gets its message, not a bare 500.
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
      throw new InferenceFailedError(`inference failed on ${this.id}: ${message}`, { cause: error });
    }
  }

  async release(): Promise<void> {
    // No step may still be running on the session it frees.
    await this.#generation?.engine.close();
    await this.session.release();
  }
}
