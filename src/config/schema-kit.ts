/**
 * A small declarative schema: each key carries its type, default and one-line description,
 * so the same table validates configs and renders the reference docs. Unknown keys are
 * errors, and every problem is collected as `path: message` before anything throws.
 */
export type FieldSpec =
  | { kind: 'integer'; description: string; default?: number; min?: number; max?: number }
  | { kind: 'number'; description: string; default?: number; min?: number; max?: number }
  | { kind: 'boolean'; description: string; default?: boolean }
  | { kind: 'string'; description: string; default?: string; pattern?: RegExp; patternHint?: string }
  | { kind: 'enum'; description: string; default?: string; values: readonly string[] }
  | { kind: 'duration'; description: string; default?: number; allowAuto?: boolean; min?: number; max?: number }
  | {
      kind: 'array';
      description: string;
      default?: readonly unknown[];
      items: FieldSpec;
      minItems?: number;
      maxItems?: number;
    }
  | { kind: 'object'; description: string; fields: Readonly<Record<string, FieldSpec>>; optional?: boolean }
  | { kind: 'map'; description: string; keyHint: string; values: FieldSpec; keyPattern?: RegExp };

const DURATION_UNITS_US: Record<string, number> = { us: 1, µs: 1, ms: 1_000, s: 1_000_000, m: 60_000_000 };
const DURATION = /^(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m)$/;

/** Microseconds from an integer (already µs) or a string such as `5ms`, `250us`, `1.5s`. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  if (value.trim() === '0') return 0;
  const match = DURATION.exec(value.trim());
  if (!match) return undefined;
  const micros = Number(match[1]) * (DURATION_UNITS_US[match[2] as string] as number);
  return Number.isFinite(micros) ? Math.round(micros) : undefined;
}

/** A duration in microseconds as the shortest readable string: `0`, `250us`, `5ms`, `2s`. */
export function formatDuration(micros: number): string {
  if (micros === 0) return '0';
  if (micros % 1_000_000 === 0) return `${micros / 1_000_000}s`;
  if (micros % 1_000 === 0) return `${micros / 1_000}ms`;
  return `${micros}us`;
}

export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `"${value.length > 40 ? `${value.slice(0, 40)}…` : value}"`;
  if (typeof value === 'object') return 'a mapping';
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : typeof value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Checks `value` against `spec`, pushing `path: message` problems; returns the value with
 * defaults filled in (undefined when absent and no default).
 */
export function validateField(spec: FieldSpec, value: unknown, path: string, problems: string[]): unknown {
  if (value === undefined) {
    if (spec.kind === 'object' && !spec.optional) return validateField(spec, {}, path, problems);
    return spec.kind === 'object' || spec.kind === 'map' ? undefined : spec.default;
  }
  const got = `got ${describeValue(value)}`;
  switch (spec.kind) {
    case 'integer':
    case 'number': {
      const ok =
        typeof value === 'number' && (spec.kind === 'number' ? Number.isFinite(value) : Number.isSafeInteger(value));
      if (!ok) {
        problems.push(`${path}: expected ${spec.kind === 'integer' ? 'an integer' : 'a number'}, ${got}`);
        return spec.default;
      }
      const n = value;
      if ((spec.min !== undefined && n < spec.min) || (spec.max !== undefined && n > spec.max)) {
        problems.push(`${path}: expected ${rangeText(spec.min, spec.max)}, ${got}`);
      }
      return n;
    }
    case 'boolean':
      if (typeof value !== 'boolean') problems.push(`${path}: expected true or false, ${got}`);
      return value;
    case 'string':
      if (typeof value !== 'string' || value === '') {
        problems.push(`${path}: expected a non-empty string, ${got}`);
      } else if (spec.pattern && !spec.pattern.test(value)) {
        problems.push(`${path}: expected ${spec.patternHint ?? `a string matching ${String(spec.pattern)}`}, ${got}`);
      }
      return value;
    case 'enum':
      if (typeof value !== 'string' || !spec.values.includes(value)) {
        problems.push(`${path}: expected one of ${spec.values.join(', ')}, ${got}`);
      }
      return value;
    case 'duration': {
      if (spec.allowAuto && value === 'auto') return value;
      const micros = parseDuration(value);
      if (micros === undefined) {
        const auto = spec.allowAuto ? ', or auto' : '';
        problems.push(`${path}: expected microseconds (an integer) or a duration such as "5ms"${auto}, ${got}`);
      } else if ((spec.min !== undefined && micros < spec.min) || (spec.max !== undefined && micros > spec.max)) {
        problems.push(`${path}: expected ${durationRangeText(spec.min, spec.max)}, ${got}`);
      }
      return micros;
    }
    case 'array': {
      if (!Array.isArray(value)) {
        problems.push(`${path}: expected a list, ${got}`);
        return spec.default;
      }
      if (spec.minItems !== undefined && value.length < spec.minItems) {
        problems.push(`${path}: expected at least ${spec.minItems} item(s), got ${value.length}`);
      }
      if (spec.maxItems !== undefined && value.length > spec.maxItems) {
        problems.push(`${path}: expected at most ${spec.maxItems} item(s), got ${value.length}`);
        return spec.default;
      }
      return value.map((item, index) => validateField(spec.items, item, `${path}[${index}]`, problems));
    }
    case 'object': {
      if (!isPlainObject(value)) {
        problems.push(`${path}: expected a mapping, ${got}`);
        return undefined;
      }
      const result: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        if (!(key in spec.fields)) {
          problems.push(`${joinPath(path, key)}: unknown key (expected one of ${Object.keys(spec.fields).join(', ')})`);
        }
      }
      for (const [key, field] of Object.entries(spec.fields)) {
        const checked = validateField(field, value[key], joinPath(path, key), problems);
        if (checked !== undefined) result[key] = checked;
      }
      return result;
    }
    case 'map': {
      if (!isPlainObject(value)) {
        problems.push(`${path}: expected a mapping of ${spec.keyHint}, ${got}`);
        return undefined;
      }
      const result: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) {
        if (spec.keyPattern && !spec.keyPattern.test(key)) {
          problems.push(`${joinPath(path, key)}: expected a key that is ${spec.keyHint}`);
        }
        const checked = validateField(spec.values, item, joinPath(path, key), problems);
        if (checked !== undefined) result[key] = checked;
      }
      return result;
    }
  }
}

export function joinPath(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

function rangeText(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return `a value from ${min} to ${max}`;
  if (min !== undefined) return `a value ≥ ${min}`;
  return `a value ≤ ${String(max)}`;
}

function durationRangeText(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return `a duration from ${formatDuration(min)} to ${formatDuration(max)}`;
  if (min !== undefined) return `a duration of at least ${formatDuration(min)}`;
  return `a duration of at most ${formatDuration(max ?? 0)}`;
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
