import { parentPort, workerData } from 'node:worker_threads';
import type { ProbeAnswer } from './handler-probe.js';
import { loadHandler } from './load.js';

/** The worker side of checkHandlerImport: one import, one answer. */
const { file } = workerData as { file: string };
let answer: ProbeAnswer;
try {
  await loadHandler(file);
  answer = { ok: true };
} catch (error) {
  answer = { ok: false, message: error instanceof Error ? error.message : String(error) };
}
parentPort?.postMessage(answer);
