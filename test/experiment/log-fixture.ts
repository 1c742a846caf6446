import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { logFileName } from '../../src/experiment/log-files.js';
import type { FeedbackRecord, LogRecord, PredictionRecord } from '../../src/experiment/log-records.js';
import { seededNormal, seededUniform } from './random.js';

export const MODEL = 'ranker';
const START = Date.UTC(2026, 0, 1);

/** An ISO time `seconds` after the experiment's start. */
export function at(seconds: number): string {
  return new Date(START + seconds * 1000).toISOString();
}

export function prediction(
  id: string,
  version: string,
  seconds: number,
  fields: Partial<PredictionRecord> = {},
): PredictionRecord {
  return {
    type: 'prediction',
    time: at(seconds),
    id,
    model: MODEL,
    version,
    routing: 'split',
    status: 200,
    latency_ms: 20,
    rows: 1,
    ...fields,
  };
}

export function feedback(id: string, seconds: number, fields: Partial<FeedbackRecord> = {}): FeedbackRecord {
  return { type: 'feedback', time: at(seconds), id, model: MODEL, version: '?', ...fields };
}

/** Writes `lines` (records, or raw text for broken lines) to `folder/predictions-00000N.jsonl`, one per line. */
export async function writeLogFile(
  folder: string,
  sequence: number,
  lines: readonly (LogRecord | string)[],
  tail = '',
): Promise<string> {
  await mkdir(folder, { recursive: true });
  const path = join(folder, logFileName(sequence));
  const text = lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n');
  await writeFile(path, `${text}\n`);
  if (tail) await appendFile(path, tail);
  return path;
}

/** What one request of an arm produced: fields of its prediction and of its feedback (none when absent). */
export interface Outcome {
  status?: number;
  latency_ms?: number;
  prediction?: string;
  value?: number;
  reward?: number;
  label?: string;
}

export type Arm = (uniform: () => number, normal: () => number) => Outcome;

/** A conversion with probability `rate`, sent back as feedback `value` 0 or 1. */
export const converts =
  (rate: number): Arm =>
  (uniform) => ({ value: uniform() < rate ? 1 : 0 });

/**
 * `perArm` requests to each version, taking turns one second apart, each prediction followed a
 * minute later by its feedback (when the arm gives any). Seeded, so every run sees the same log.
 */
export function simulatedLog(arms: Record<string, Arm>, perArm: number, seed = 1): LogRecord[] {
  const uniform = seededUniform(seed);
  const normal = seededNormal(seed + 1);
  const predictions: LogRecord[] = [];
  const feedbacks: LogRecord[] = [];
  let second = 0;
  for (let i = 0; i < perArm; i++) {
    for (const [version, arm] of Object.entries(arms)) {
      const { value, reward, label, ...served } = arm(uniform, normal);
      const id = `${version}-${i}`;
      predictions.push(prediction(id, version, second, served));
      if (value !== undefined || reward !== undefined || label !== undefined) {
        const answer = { version, ...(value !== undefined && { value }), ...(reward !== undefined && { reward }) };
        feedbacks.push(feedback(id, second + 60, { ...answer, ...(label !== undefined && { label }) }));
      }
      second += 1;
    }
  }
  return [...predictions, ...feedbacks];
}
