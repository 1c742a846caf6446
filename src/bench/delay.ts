import { formatDuration, parseDuration } from '../config/schema-kit.js';

/** A sweep point's max_queue_delay as configs spell it: `2ms`, `0`, or `auto`. */
export function formatDelay(delay: number | 'auto'): string {
  return delay === 'auto' ? 'auto' : formatDuration(delay);
}

/** `--delays` values: a duration (`0`, `500us`, `2ms`; a bare number is µs) or `auto`; undefined if neither. */
export function parseDelay(value: string): number | 'auto' | undefined {
  const text = value.trim();
  if (text.toLowerCase() === 'auto') return 'auto';
  return parseDuration(/^\d+$/.test(text) ? Number(text) : text);
}

/** The management API's `max_batch_delay` (ms, TorchServe's unit), or `auto`. */
export function delayParameter(delay: number | 'auto'): string {
  return delay === 'auto' ? 'auto' : String(delay / 1000);
}
