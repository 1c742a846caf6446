import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { validateField } from '../config/schema-kit.js';
import { ConfigInvalidError } from '../core/errors.js';
import type { CanaryRecord } from './canary.js';
import { trafficProblems, trafficSpec, type TrafficPolicy } from '../config/model-policy.js';

/** What run-time changes leave behind for one model. */
export interface ModelRouting {
  readonly default_version?: string;
  readonly traffic?: TrafficPolicy;
  readonly canary?: CanaryRecord;
}

const FORMAT = 1;

/**
 * The state file: default versions, traffic and canaries, written whole on every change
 * (to a temporary file, then renamed, so a crash never leaves half a file).
 */
export class RoutingStateFile {
  #writing: Promise<void> = Promise.resolve();

  constructor(readonly path: string) {}

  /** The saved state; empty when there is no file yet. */
  async read(): Promise<Map<string, ModelRouting>> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw error;
    }
    const problems: string[] = [];
    let document: unknown;
    try {
      document = JSON.parse(text);
    } catch (error) {
      throw new ConfigInvalidError(this.path, [`not JSON: ${(error as Error).message}; delete the file to start over`]);
    }
    const models = (document as { format?: unknown; models?: unknown } | null)?.models;
    if ((document as { format?: unknown })?.format !== FORMAT || typeof models !== 'object' || models === null) {
      throw new ConfigInvalidError(this.path, [`expected {"format": ${FORMAT}, "models": {...}}`]);
    }
    const state = new Map<string, ModelRouting>();
    for (const [name, raw] of Object.entries(models as Record<string, Record<string, unknown>>)) {
      const traffic =
        raw.traffic === undefined
          ? undefined
          : (validateField(trafficSpec, raw.traffic, `models.${name}.traffic`, problems) as TrafficPolicy);
      if (traffic) problems.push(...trafficProblems(traffic, `models.${name}.traffic`));
      if (raw.default_version !== undefined && typeof raw.default_version !== 'string') {
        problems.push(`models.${name}.default_version: expected a string`);
      }
      if (raw.canary !== undefined && !looksLikeCanary(raw.canary))
        problems.push(`models.${name}.canary: not a canary record`);
      state.set(name, {
        ...(typeof raw.default_version === 'string' ? { default_version: raw.default_version } : {}),
        ...(traffic ? { traffic } : {}),
        ...(looksLikeCanary(raw.canary) ? { canary: raw.canary } : {}),
      });
    }
    if (problems.length > 0) throw new ConfigInvalidError(this.path, problems);
    return state;
  }

  /** Writes the state; calls queue up so the last one wins. */
  write(state: ReadonlyMap<string, ModelRouting>): Promise<void> {
    const text = `${JSON.stringify({ format: FORMAT, models: Object.fromEntries(state) }, null, 2)}\n`;
    this.#writing = this.#writing
      .catch(() => undefined)
      .then(async () => {
        const partial = `${this.path}.${randomBytes(4).toString('hex')}.partial`;
        try {
          await writeFile(partial, text, { mode: 0o600 });
          await rename(partial, this.path);
        } finally {
          await rm(partial, { force: true });
        }
      });
    return this.#writing;
  }
}

function looksLikeCanary(value: unknown): value is CanaryRecord {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Partial<CanaryRecord>;
  return (
    typeof record.model === 'string' &&
    typeof record.stable === 'string' &&
    typeof record.candidate === 'string' &&
    ['running', 'promoted', 'rolled_back'].includes(record.state as string) &&
    typeof record.step === 'number' &&
    Array.isArray(record.history) &&
    Array.isArray(record.settings?.steps) &&
    typeof record.settings?.interval === 'number' &&
    // A setting saved as anything but a number would make its check compare false, and never trip.
    NUMBER_SETTINGS.every((key) => ['number', 'undefined'].includes(typeof record.settings?.[key]))
  );
}

const NUMBER_SETTINGS = [
  'max_error_rate',
  'max_p99',
  'min_requests',
  'min_agreement',
  'agreement_tolerance',
  'max_quality_drop',
] as const satisfies readonly (keyof CanaryRecord['settings'])[];
