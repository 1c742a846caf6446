import { parseDuration } from '../config/schema-kit.js';
import { UsageError } from '../errors.js';

/** Commander parser for options given comma-separated, repeated, or both. */
export function commaList(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean),
  ];
}

/** An integer flag value, refused with a one-line usage error when it is not one. */
export function integerOption(value: string, flag: string, min = Number.MIN_SAFE_INTEGER): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < min) {
    throw new UsageError(
      `${flag}: expected an integer${min > Number.MIN_SAFE_INTEGER ? ` ≥ ${min}` : ''}, got "${value}"`,
    );
  }
  return number;
}

/** A duration flag in microseconds: an integer (µs, as in config files) or "500us", "2ms", "10s". */
export function durationOption(value: string, flag: string): number {
  const parsed = parseDuration(/^\d+$/.test(value) ? Number(value) : value);
  if (parsed === undefined)
    throw new UsageError(`${flag}: expected a duration such as 0, 500us, 2ms, 10s, got "${value}"`);
  return parsed;
}
