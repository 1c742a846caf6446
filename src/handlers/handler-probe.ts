import { Worker } from 'node:worker_threads';
import { HandlerInvalidError, HandlerLoadTimeoutError } from '../core/errors.js';

/** A handler's exports are checked as hooks; a pipeline step module's are the caller's to check. */
export type ProbedModule = 'handler' | 'step module';

/** What the probe worker sends back: nothing on success, else the message of what failed. */
export type ProbeAnswer = { readonly ok: true } | { readonly ok: false; readonly message: string };

/**
 * Imports a handler file in a worker thread of its own and checks its exports, so that what the
 * module does at import cannot reach the caller: a loop for ever is stopped after `timeoutMs`
 * (the worker is terminated, which interrupts running JavaScript), and `process.exit` ends only
 * that thread. Pack checks every handler so, and serve before any instance imports one; a
 * pipeline's step modules (`kind: 'step module'`) are imported only, their exports checked by
 * the caller.
 */
export async function checkHandlerImport(
  file: string,
  timeoutMs: number,
  kind: ProbedModule = 'handler',
): Promise<void> {
  const worker = new Worker(new URL('./handler-probe-worker.js', import.meta.url), { workerData: { file, kind } });
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = await new Promise<ProbeAnswer>((resolve, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new HandlerLoadTimeoutError(
              `${kind} ${file} did not finish importing within ${timeoutMs} ms (handler_load_timeout); the import was stopped`,
            ),
          ),
        timeoutMs,
      );
      worker.once('message', resolve);
      worker.once('error', (error) =>
        reject(new HandlerInvalidError(`${kind} ${file} threw while being imported: ${error.message}`)),
      );
      worker.once('exit', (code) =>
        reject(new HandlerInvalidError(`${kind} ${file} called process.exit(${code}) while being imported`)),
      );
    });
    if (!answer.ok) throw new HandlerInvalidError(answer.message);
  } finally {
    clearTimeout(timer);
    worker.removeAllListeners();
    await worker.terminate();
  }
}
