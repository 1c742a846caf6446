import { Option, type Command } from 'commander';
import { parseDuration } from '../config/schema-kit.js';
import { UsageError } from '../core/errors.js';
import { withTlsClient, type TlsClientOptions } from './tls-options.js';

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

/** `--flag`, `--flag=true` or `--flag=false`. */
export function booleanOption(value: string | undefined, flag: string): boolean {
  if (value === undefined || value === 'true') return true;
  if (value === 'false') return false;
  throw new UsageError(`${flag}: expected true or false, got "${value}"`);
}

/** A non-negative number flag value (an error limit, a share). */
export function fractionOption(value: string, flag: string): number {
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number) || number < 0) {
    throw new UsageError(`${flag}: expected a number ≥ 0, got "${value}"`);
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

/** Where a management client command finds the server, and how it prints. */
export interface ManagementTargetOptions extends TlsClientOptions {
  managementUrl: string;
  token?: string;
  tokenFile?: string;
  json: boolean;
}

/** The flags every management API client command takes. */
export function withManagementTarget(command: Command): Command {
  return withTlsClient(
    command
      .addOption(
        new Option('--management-url <url>', "the server's management API (https:// with TLS)")
          .default('http://127.0.0.1:8081')
          .env('BATCHSERVE_MANAGEMENT_URL'),
      )
      .option('--token <token>', 'management bearer token (default: $BATCHSERVE_TOKEN, else the key file)')
      .option(
        '--token-file <path>',
        'file holding the management token (default: the one serve writes, $BATCHSERVE_KEY_FILE or ./batchserve.key)',
      ),
  ).option('--json', 'print the answer as JSON', false);
}
