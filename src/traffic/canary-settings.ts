import { parseDuration } from '../config/schema-kit.js';
import { UsageError } from '../core/errors.js';

/** The guardrails and pace of one canary. */
export interface CanarySettings {
  readonly version: string;
  /** Percent of the model's traffic the candidate gets at each step, rising, at most 100. */
  readonly steps: readonly number[];
  /** Microseconds each step lasts before it is judged. */
  readonly interval: number;
  /** The candidate's largest share of 5xx answers, 0..1. */
  readonly max_error_rate: number;
  /** Microseconds; the candidate's largest p99 latency, when set. */
  readonly max_p99?: number;
  /** Requests the candidate must have answered in a step before it may advance. */
  readonly min_requests: number;
  /** The candidate's least share of answers to mirrored requests that agree with the stable's, 0..1, when set. */
  readonly min_agreement?: number;
  /** How close numbers must be to agree, as `shadow_tolerance`; set at the start whenever min_agreement is. */
  readonly agreement_tolerance?: number;
  /** The largest drop of the candidate's accuracy (or mean reward) below the stable's, when set. */
  readonly max_quality_drop?: number;
}

const DEFAULT_CANARY = {
  steps: [5, 20, 50, 100],
  interval: 60_000_000,
  max_error_rate: 0.01,
  min_requests: 10,
} as const;

const KEYS = [
  'version',
  'steps',
  'interval',
  'max_error_rate',
  'max_p99',
  'min_requests',
  'min_agreement',
  'agreement_tolerance',
  'max_quality_drop',
];

/**
 * A canary request as the management API takes it: `version` and, optionally, `steps` (a list
 * or "5,20,50,100"), `interval` ("60s"), `max_error_rate` ("0.1%" or a fraction),
 * `max_p99` ("200ms"), `min_requests`, `min_agreement` ("98%" or a fraction),
 * `agreement_tolerance` (a number) and `max_quality_drop` (0.02 or "2%").
 */
export function parseCanarySettings(raw: unknown): CanarySettings {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new UsageError('a canary needs a JSON object such as {"version": "2"}');
  }
  const body = raw as Record<string, unknown>;
  const unknown = Object.keys(body).filter((key) => !KEYS.includes(key));
  if (unknown.length > 0)
    throw new UsageError(`unknown canary key(s) ${unknown.join(', ')} (expected ${KEYS.join(', ')})`);
  const version = body.version;
  if (typeof version !== 'string' && typeof version !== 'number') {
    throw new UsageError('a canary needs "version": the candidate version');
  }
  const steps = parseSteps(body.steps ?? DEFAULT_CANARY.steps);
  const interval = body.interval === undefined ? DEFAULT_CANARY.interval : parseDuration(body.interval);
  if (interval === undefined || interval < 1000) {
    throw new UsageError(
      `interval must be a duration of at least 1ms, such as "60s"; got ${JSON.stringify(body.interval)}`,
    );
  }
  const maxP99 = body.max_p99 === undefined || body.max_p99 === null ? undefined : parseDuration(body.max_p99);
  if (body.max_p99 !== undefined && body.max_p99 !== null && (maxP99 === undefined || maxP99 === 0)) {
    throw new UsageError(`max_p99 must be a duration such as "200ms", got ${JSON.stringify(body.max_p99)}`);
  }
  const minRequests = body.min_requests ?? DEFAULT_CANARY.min_requests;
  if (!Number.isSafeInteger(minRequests) || (minRequests as number) < 1) {
    throw new UsageError(`min_requests must be a positive integer, got ${JSON.stringify(body.min_requests)}`);
  }
  const minAgreement = isGiven(body.min_agreement) ? parseRate(body.min_agreement, 'min_agreement') : undefined;
  const tolerance = isGiven(body.agreement_tolerance) ? parseTolerance(body.agreement_tolerance) : undefined;
  if (tolerance !== undefined && minAgreement === undefined) {
    throw new UsageError('agreement_tolerance needs min_agreement: it is the tolerance of that guardrail');
  }
  const maxQualityDrop = isGiven(body.max_quality_drop) ? parseQualityDrop(body.max_quality_drop) : undefined;
  return {
    version: String(version),
    steps,
    interval,
    max_error_rate: parseRate(body.max_error_rate ?? DEFAULT_CANARY.max_error_rate),
    ...(maxP99 !== undefined ? { max_p99: maxP99 } : {}),
    min_requests: minRequests as number,
    ...(minAgreement !== undefined ? { min_agreement: minAgreement } : {}),
    ...(tolerance !== undefined ? { agreement_tolerance: tolerance } : {}),
    ...(maxQualityDrop !== undefined ? { max_quality_drop: maxQualityDrop } : {}),
  };
}

/** Null, like an absent key, means no such guardrail. */
const isGiven = (value: unknown): boolean => value !== undefined && value !== null;

function parseSteps(value: unknown): number[] {
  const list = typeof value === 'string' ? value.split(',').map((part) => Number(part.trim())) : value;
  const ok =
    Array.isArray(list) &&
    list.length > 0 &&
    list.every(
      (step, index) => typeof step === 'number' && step > 0 && step <= 100 && (index === 0 || step > list[index - 1]),
    );
  if (!ok) {
    throw new UsageError(
      `steps must be rising percentages above 0 and at most 100, such as 5,20,50,100; got ${JSON.stringify(value)}`,
    );
  }
  return list as number[];
}

/** "0.1%" is 0.001; a bare number is a fraction. `key` names the setting in the refusal. */
export function parseRate(value: unknown, key = 'max_error_rate'): number {
  const rate = parseAmount(value);
  if (!(rate >= 0 && rate <= 1)) {
    throw new UsageError(
      `${key} must be a percentage such as "0.1%" or a fraction from 0 to 1, got ${JSON.stringify(value)}`,
    );
  }
  return rate;
}

/** Absolute, so it reads as accuracy points or reward units alike; "2%" is 0.02. */
function parseQualityDrop(value: unknown): number {
  const drop = parseAmount(value);
  if (!(drop >= 0)) {
    throw new UsageError(
      `max_quality_drop must be an amount of at least 0, such as 0.02 or "2%", got ${JSON.stringify(value)}`,
    );
  }
  return drop;
}

/** A number ≥ 0, or its text as the CLI sends it ("1e-5"). */
function parseTolerance(value: unknown): number {
  const tolerance = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0) {
    throw new UsageError(
      `agreement_tolerance must be a number of at least 0, such as 1e-5, got ${JSON.stringify(value)}`,
    );
  }
  return tolerance;
}

/** A finite number, or text such as "0.25" or "12.5%"; NaN for anything else. */
function parseAmount(value: unknown): number {
  if (typeof value === 'number') return Number.isFinite(value) ? value : NaN;
  const match = typeof value === 'string' ? /^(\d+(?:\.\d+)?)(%?)$/.exec(value.trim()) : null;
  return match ? Number(match[1]) / (match[2] === '%' ? 100 : 1) : NaN;
}

export const formatRate = (rate: number): string => `${Number((rate * 100).toPrecision(3))}%`;

/** Quality figures and drops: three significant digits, as a plain number. */
export const formatAmount = (amount: number): string => String(Number(amount.toPrecision(3)));
