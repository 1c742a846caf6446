import { PredictionLogReadError } from '../core/errors.js';
import { findLogFiles, readLogRecords } from './log-reader.js';
import type { FeedbackRecord, PredictionRecord } from './log-records.js';

/** One served prediction and the feedback that joined it, if any. */
export interface JoinedPrediction {
  readonly id: string;
  readonly version: string;
  /** When the answer was ready, in ms since the epoch: the order observations arrived in. */
  readonly time: number;
  readonly status: number;
  readonly latencyMs: number;
  /** The top-1 label of a one-row classifier request; a many-row request has no single one. */
  readonly prediction?: string;
  feedback?: FeedbackRecord;
}

/** A model's served predictions with their feedback, and what the log held besides. */
export interface JoinedLog {
  readonly model: string;
  readonly files: number;
  /** Lines that were not records (not JSON, or not a prediction or feedback object). */
  readonly skippedLines: number;
  /** Served predictions, in the order they were read; shadows' copies are left out. */
  readonly predictions: readonly JoinedPrediction[];
  readonly shadowRecords: number;
  readonly feedbackRecords: number;
  /** Ids with feedback but no served prediction: the prediction's file was rotated away, or it was never logged. */
  readonly unjoinedFeedback: number;
}

/**
 * Reads every file first and joins after, because feedback can be written long after its
 * prediction: in a later file, or after rotation started a new one.
 *
 * When one id has several feedback records, the last in time wins (the later in file order on
 * a tie): a correction replaces what was sent before, it does not count twice. When a client
 * reused an id for several predictions, its feedback joins the last of them in time.
 */
export async function joinPredictionLog(logPath: string, model: string): Promise<JoinedLog> {
  const files = await findLogFiles(logPath);
  const predictions: JoinedPrediction[] = [];
  const predictionById = new Map<string, JoinedPrediction>();
  const latestFeedback = new Map<string, { record: FeedbackRecord; time: number }>();
  let shadowRecords = 0;
  let feedbackRecords = 0;
  const skippedLines = await readLogRecords(files, (record) => {
    if (record.model !== model) return;
    if (record.type === 'feedback') {
      feedbackRecords += 1;
      const time = Date.parse(record.time);
      const before = latestFeedback.get(record.id);
      if (!before || time >= before.time) latestFeedback.set(record.id, { record, time });
    } else if (record.shadow === true || record.routing === 'shadow') {
      shadowRecords += 1;
    } else {
      const prediction = servedPrediction(record);
      predictions.push(prediction);
      const before = predictionById.get(prediction.id);
      if (!before || prediction.time >= before.time) predictionById.set(prediction.id, prediction);
    }
  });
  if (predictions.length === 0) {
    throw new PredictionLogReadError(
      `${logPath}: no served predictions of model "${model}" in ${files.length} log file(s)`,
    );
  }
  let unjoinedFeedback = 0;
  for (const [id, { record }] of latestFeedback) {
    const prediction = predictionById.get(id);
    if (prediction) prediction.feedback = record;
    else unjoinedFeedback += 1;
  }
  return { model, files: files.length, skippedLines, predictions, shadowRecords, feedbackRecords, unjoinedFeedback };
}

function servedPrediction(record: PredictionRecord): JoinedPrediction {
  return {
    id: record.id,
    version: record.version,
    time: Date.parse(record.time),
    status: record.status,
    latencyMs: record.latency_ms,
    ...(typeof record.prediction === 'string' ? { prediction: record.prediction } : {}),
  };
}
