/**
 * A strict reader of the Prometheus text exposition format (0.0.4), for tests: it throws on
 * anything a scraper could misread rather than skipping it, and checks histogram invariants.
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface MetricFamily {
  readonly name: string;
  help: string | undefined;
  type: string | undefined;
  readonly samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Readonly<Record<string, readonly string[]>> = {
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['_sum', '_count'],
};

/** Families by name, in order of appearance. Every family must carry HELP and TYPE. */
export function parseExposition(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const seriesSeen = new Set<string>();
  let current: MetricFamily | undefined;
  const lines = text.split('\n');
  if (lines.pop() !== '') throw new Error('exposition must end with a newline');

  const familyOf = (name: string, lineNo: number): MetricFamily => {
    if (!METRIC_NAME.test(name)) throw new Error(`line ${lineNo}: bad metric name ${JSON.stringify(name)}`);
    let family = families.get(name);
    if (family === undefined) {
      family = { name, help: undefined, type: undefined, samples: [] };
      families.set(name, family);
    } else if (family !== current) {
      throw new Error(`line ${lineNo}: family ${name} is split into non-contiguous groups`);
    }
    current = family;
    return family;
  };

  lines.forEach((line, index) => {
    const lineNo = index + 1;
    if (line === '') return;
    if (line.startsWith('#')) {
      const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (meta === null) return;
      const [, keyword = '', name = '', rest = ''] = meta;
      const family = familyOf(name, lineNo);
      if (family.samples.length > 0) throw new Error(`line ${lineNo}: ${keyword} after samples of ${name}`);
      if (keyword === 'HELP') {
        if (family.help !== undefined) throw new Error(`line ${lineNo}: second HELP for ${name}`);
        family.help = unescapeHelp(rest, lineNo);
      } else {
        if (family.type !== undefined) throw new Error(`line ${lineNo}: second TYPE for ${name}`);
        if (!TYPES.has(rest)) throw new Error(`line ${lineNo}: unknown type ${JSON.stringify(rest)}`);
        family.type = rest;
      }
      return;
    }
    const sample = parseSample(line, lineNo);
    if (current === undefined || !belongsTo(sample.name, current)) {
      throw new Error(`line ${lineNo}: sample ${sample.name} outside its family's HELP/TYPE block`);
    }
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (seriesSeen.has(key)) throw new Error(`line ${lineNo}: duplicate series ${key}`);
    seriesSeen.add(key);
    current.samples.push(sample);
  });

  for (const family of families.values()) {
    if (family.help === undefined) throw new Error(`${family.name} has no HELP`);
    if (family.type === undefined) throw new Error(`${family.name} has no TYPE`);
    if (family.type === 'histogram') checkHistogram(family);
  }
  return families;
}

function belongsTo(sampleName: string, family: MetricFamily): boolean {
  const suffixes = SUFFIXES[family.type ?? ''] ?? [];
  const bare = family.type !== 'histogram' && sampleName === family.name;
  return bare || suffixes.some((suffix) => sampleName === family.name + suffix);
}

function unescapeHelp(raw: string, lineNo: number): string {
  return raw.replace(/\\(.?)/g, (_, c: string) => {
    if (c === '\\') return '\\';
    if (c === 'n') return '\n';
    throw new Error(`line ${lineNo}: bad escape in HELP`);
  });
}

function parseSample(line: string, lineNo: number): Sample {
  const fail = (why: string): never => {
    throw new Error(`line ${lineNo}: ${why}: ${line}`);
  };
  const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line) ?? fail('no metric name');
  const name = nameMatch[0];
  let pos = name.length;
  const labels: Record<string, string> = {};
  if (line[pos] === '{') {
    pos += 1;
    while (line[pos] !== '}') {
      const labelMatch = /^([^=]*)="/.exec(line.slice(pos)) ?? fail('bad label');
      const labelName = labelMatch[1] ?? '';
      if (!LABEL_NAME.test(labelName)) fail(`bad label name ${JSON.stringify(labelName)}`);
      if (labelName in labels) fail(`label ${labelName} repeated`);
      pos += labelMatch[0].length;
      let value = '';
      for (;;) {
        const c = line[pos] ?? fail('unterminated label value');
        pos += 1;
        if (c === '"') break;
        if (c === '\\') {
          const escaped = line[pos];
          pos += 1;
          if (escaped === '\\' || escaped === '"') value += escaped;
          else if (escaped === 'n') value += '\n';
          else fail('bad escape in label value');
        } else {
          value += c;
        }
      }
      labels[labelName] = value;
      if (line[pos] === ',') pos += 1;
      else if (line[pos] !== '}') fail('expected , or } after a label');
    }
    pos += 1;
  }
  if (line[pos] !== ' ') fail('expected one space before the value');
  const fields = line.slice(pos + 1).split(' ');
  if (fields.length > 2 || fields.some((f) => f === '')) fail('expected value [timestamp]');
  const value = parseValue(fields[0] ?? '') ?? fail('bad value');
  if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) fail('bad timestamp');
  return { name, labels, value };
}

function parseValue(text: string): number | undefined {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  // prom-client 15 writes NaN as "Nan" (an idle event-loop-lag gauge does); Prometheus reads
  // values with Go's case-insensitive ParseFloat, so that spelling scrapes correctly.
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return undefined;
  return Number(text);
}

/** Labels other than `le`, as a stable key: one histogram series per key. */
function seriesKey(labels: Readonly<Record<string, string>>): string {
  return JSON.stringify(
    Object.entries(labels)
      .filter(([name]) => name !== 'le')
      .sort(),
  );
}

function checkHistogram(family: MetricFamily): void {
  const buckets = new Map<string, Sample[]>();
  const sums = new Map<string, number>();
  const counts = new Map<string, number>();
  for (const sample of family.samples) {
    const key = seriesKey(sample.labels);
    if (sample.name.endsWith('_bucket')) {
      if (sample.labels.le === undefined) throw new Error(`${family.name}: bucket without le`);
      buckets.set(key, [...(buckets.get(key) ?? []), sample]);
    } else if (sample.name.endsWith('_sum')) {
      sums.set(key, sample.value);
    } else {
      counts.set(key, sample.value);
    }
  }
  for (const [key, series] of buckets) {
    const where = `${family.name}${key}`;
    let previousBound = -Infinity;
    let previousCount = 0;
    for (const bucket of series) {
      const bound = parseValue(bucket.labels.le ?? '');
      if (bound === undefined || Number.isNaN(bound)) throw new Error(`${where}: bad le ${bucket.labels.le}`);
      if (bound <= previousBound) throw new Error(`${where}: le ${bound} not above ${previousBound}`);
      if (bucket.value < previousCount) throw new Error(`${where}: cumulative count falls at le=${bound}`);
      previousBound = bound;
      previousCount = bucket.value;
    }
    if (previousBound !== Infinity) throw new Error(`${where}: last bucket is not le="+Inf"`);
    if (counts.get(key) !== previousCount) throw new Error(`${where}: +Inf bucket differs from _count`);
    if (!sums.has(key)) throw new Error(`${where}: no _sum`);
  }
  for (const key of [...sums.keys(), ...counts.keys()]) {
    if (!buckets.has(key)) throw new Error(`${family.name}${key}: _sum/_count without buckets`);
  }
}

/** The samples named `name` whose labels include all of `labels`. */
export function samplesOf(
  families: Map<string, MetricFamily>,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): Sample[] {
  const result: Sample[] = [];
  for (const family of families.values()) {
    for (const sample of family.samples) {
      if (sample.name === name && Object.entries(labels).every(([k, v]) => sample.labels[k] === v)) {
        result.push(sample);
      }
    }
  }
  return result;
}

/** The cumulative `_bucket` counts of one histogram series, keyed by their `le` text. */
export function bucketsOf(
  families: Map<string, MetricFamily>,
  name: string,
  labels: Readonly<Record<string, string>>,
): Record<string, number> {
  const buckets: Record<string, number> = {};
  for (const sample of samplesOf(families, `${name}_bucket`, labels)) buckets[sample.labels.le ?? ''] = sample.value;
  return buckets;
}
