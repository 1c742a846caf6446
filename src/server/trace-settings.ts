import { TraceSettingError, TracingOffError } from '../core/errors.js';

/**
 * Which requests are traced, as Triton's trace extension sets it (`/v2[/models/{m}]/trace/setting`,
 * in its OpenTelemetry mode): a global scope and per-model scopes over it. A request whose
 * `traceparent` says its caller sampled it is traced whatever the rate (the caller's trace
 * would have a hole otherwise); others are drawn at `1/trace_rate`. `trace_level` OFF stops a
 * scope's tracing altogether, and `trace_count` counts down the traces left (-1: no limit).
 */

/** One scope's settings: the ratio is what `--trace-sample-ratio` gives and trace_rate shows as 1/ratio. */
interface Scope {
  on: boolean;
  ratio: number;
  count: number;
}

/** Triton's answer: each setting's value as a string, trace_level as an array. */
export type TraceSettingsJson = Record<string, string | string[]>;

const FILE_SETTINGS = new Set(['trace_file', 'log_frequency']);
const SETTINGS = ['trace_level', 'trace_rate', 'trace_count', 'trace_mode'] as const;

export class TraceSettings {
  readonly #global: Scope;
  /** A model's own settings; the ones it does not hold follow the global scope. */
  readonly #models = new Map<string, Partial<Scope>>();
  readonly #exporting: boolean;

  /** `exporting`: an OTLP endpoint is set; without one nothing is traced and nothing can be set. */
  constructor(ratio: number, exporting: boolean) {
    this.#global = { on: exporting, ratio, count: -1 };
    this.#exporting = exporting;
  }

  /** Whether this request to `model` is traced: a sampled parent is followed, others drawn at the ratio. */
  sample(model: string, parentSampled: boolean): boolean {
    const own = this.#models.get(model);
    if (!(own?.on ?? this.#global.on)) return false;
    const scope = own?.count !== undefined ? own : this.#global;
    const count = scope.count as number;
    if (count === 0) return false;
    if (!parentSampled && Math.random() >= (own?.ratio ?? this.#global.ratio)) return false;
    if (count > 0) scope.count = count - 1;
    return true;
  }

  /** The settings that apply to `model` (the global ones without). */
  read(model?: string): TraceSettingsJson {
    const scope = { ...this.#global, ...(model === undefined ? {} : this.#models.get(model)) };
    return {
      trace_level: [scope.on ? 'TIMESTAMPS' : 'OFF'],
      trace_rate: scope.ratio === 0 ? '0' : String(Math.round(1 / scope.ratio)),
      trace_count: String(scope.count),
      trace_mode: 'opentelemetry',
    };
  }

  /**
   * Applies a POSTed body and answers the settings now in force. For a model, as in Triton: the
   * first settings copy the global ones it does not name, a null value gives one back to the
   * global scope, and an empty body gives all of them back.
   */
  update(model: string | undefined, body: unknown): TraceSettingsJson {
    if (!this.#exporting) {
      throw new TracingOffError(
        'this server exports no traces: start serve with --otlp-endpoint URL (or OTEL_EXPORTER_OTLP_ENDPOINT) to trace requests',
      );
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new TraceSettingError('expected a JSON object of trace settings, e.g. {"trace_rate": "100"}');
    }
    const entries = Object.entries(body as Record<string, unknown>);
    const changes: Partial<Record<keyof Scope, number | boolean | null>> = {};
    for (const [name, value] of entries) {
      if (value === null) {
        if (model === undefined)
          throw new TraceSettingError(
            `${name}: null clears a model's own setting; the global one has no other to fall back to`,
          );
        changes[fieldOf(name)] = null;
        continue;
      }
      Object.assign(changes, parsed(name, value));
    }
    if (model === undefined) {
      Object.assign(this.#global, changes);
      return this.read();
    }
    if (entries.length === 0) {
      this.#models.delete(model);
      return this.read(model);
    }
    const own = this.#models.get(model) ?? { ...this.#global };
    for (const [key, value] of Object.entries(changes) as [keyof Scope, number | boolean | null][]) {
      if (value === null) delete own[key];
      else (own as Record<string, number | boolean>)[key] = value;
    }
    this.#models.set(model, own);
    return this.read(model);
  }
}

function fieldOf(name: string): keyof Scope {
  if (name === 'trace_level') return 'on';
  if (name === 'trace_rate') return 'ratio';
  if (name === 'trace_count') return 'count';
  return refuse(name);
}

/** One setting's value, checked: Triton sends each as a string or an array of strings. */
function parsed(name: string, value: unknown): Partial<Scope> {
  const values = Array.isArray(value) ? value : [value];
  if (values.length === 0 || !values.every((item): item is string => typeof item === 'string')) {
    throw new TraceSettingError(`${name}: expected a string or an array of strings, got ${JSON.stringify(value)}`);
  }
  switch (name) {
    case 'trace_level': {
      const levels = new Set(values.map((level) => level.toUpperCase()));
      if (levels.has('TENSORS')) {
        throw new TraceSettingError(
          'trace_level: TENSORS is not traced: batchserve records timestamps only (TIMESTAMPS)',
        );
      }
      const unknown = [...levels].filter((level) => level !== 'OFF' && level !== 'TIMESTAMPS');
      if (unknown.length > 0 || (levels.has('OFF') && levels.size > 1)) {
        throw new TraceSettingError(`trace_level: expected ["OFF"] or ["TIMESTAMPS"], got ${JSON.stringify(value)}`);
      }
      return { on: levels.has('TIMESTAMPS') };
    }
    case 'trace_rate': {
      const rate = wholeNumber(name, values, 0);
      return { ratio: rate === 0 ? 0 : 1 / rate };
    }
    case 'trace_count':
      return { count: wholeNumber(name, values, -1) };
    case 'trace_mode':
      if (values[0] === 'opentelemetry' && values.length === 1) return {};
      throw new TraceSettingError(
        `trace_mode: batchserve traces in opentelemetry mode only, got ${JSON.stringify(value)}`,
      );
    default:
      return refuse(name);
  }
}

function wholeNumber(name: string, values: readonly string[], min: number): number {
  const text = values.length === 1 ? (values[0] as string) : '';
  const number = /^-?\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(number) || number < min) {
    throw new TraceSettingError(
      `${name}: expected a whole number from ${min}, as a string, got ${JSON.stringify(values.length === 1 ? values[0] : values)}`,
    );
  }
  return number;
}

function refuse(name: string): never {
  if (FILE_SETTINGS.has(name)) {
    throw new TraceSettingError(
      `${name} is a setting of Triton's own trace files; batchserve exports OpenTelemetry traces over OTLP (serve --otlp-endpoint)`,
    );
  }
  throw new TraceSettingError(`unknown trace setting "${name}": expected ${SETTINGS.join(', ')}`);
}
