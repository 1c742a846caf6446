import { formatDuration } from '../config/schema-kit.js';

/** A sweep point's max_queue_delay as configs spell it: `2ms`, `0`, or `auto`. */
export function formatDelay(delay: number | 'auto'): string {
  return delay === 'auto' ? 'auto' : formatDuration(delay);
}

/** The management API's `max_batch_delay` (ms, TorchServe's unit), or `auto`. */
export function delayParameter(delay: number | 'auto'): string {
  return delay === 'auto' ? 'auto' : String(delay / 1000);
}
