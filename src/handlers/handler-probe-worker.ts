import { parentPort, workerData } from 'node:worker_threads';
import { extname } from 'node:path';
import type { ProbeAnswer, ProbedModule } from './handler-probe.js';
import { importHandlerModule, loadHandler } from './load.js';

/** The worker side of checkHandlerImport: one import, one answer. */
const { file, kind } = workerData as { file: string; kind: ProbedModule };
let answer: ProbeAnswer;
try {
  if (kind === 'handler') await loadHandler(file);
  else await importHandlerModule(file, extname(file).toLowerCase());
  answer = { ok: true };
} catch (error) {
  answer = { ok: false, message: error instanceof Error ? error.message : String(error) };
}
parentPort?.postMessage(answer);
