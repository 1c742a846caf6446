import type { FieldSpec } from './schema-kit.js';

/** A version name as archives and routes spell it. */
export const VERSION_PATTERN = /^[\w.-]+$/;

/** Where the sticky key of a request is read: a header or a query parameter. */
export const STICKY_KEY_PATTERN = /^(header|query):[!#$%&'*+.^_`|~\w-]+$/;

/** The traffic mapping, shared by server.yaml and `PUT /models/{m}/traffic`. */
export const trafficSpec = {
  kind: 'object',
  optional: true,
  description: 'How requests that name no version are spread over the loaded versions.',
  fields: {
    split: {
      kind: 'map',
      keyHint: 'version',
      keyPattern: VERSION_PATTERN,
      values: { kind: 'number', min: 0, description: 'Relative weight of the version.' },
      description:
        'Weights per version, e.g. `{"1": 90, "2": 10}`; each request goes to one version with probability weight/sum. Versions not listed get none; without a split the default version takes everything.',
    },
    sticky_key: {
      kind: 'string',
      pattern: STICKY_KEY_PATTERN,
      patternHint: 'header:NAME or query:NAME',
      description:
        'Makes the split a function of a stable hash of this key (e.g. `header:X-User-Id`), so one user always meets one version; requests without the key are split at random.',
    },
    shadow: {
      kind: 'string',
      pattern: VERSION_PATTERN,
      patternHint: 'a version',
      description:
        'A version that receives a copy of every request; its answers are discarded but compared with the serving version (agreement and latency are exported as metrics).',
    },
    shadow_tolerance: {
      kind: 'number',
      min: 0,
      default: 1e-5,
      description:
        'Two numbers agree when |a − b| ≤ tolerance × max(1, |a|, |b|); answers agree when every output does.',
    },
  },
} as const satisfies FieldSpec;

export interface TrafficPolicy {
  readonly split?: Readonly<Record<string, number>>;
  readonly sticky_key?: string;
  readonly shadow?: string;
  readonly shadow_tolerance: number;
}

/** Which loaded versions serve: every one, the N highest, or a named list. */
export const versionPolicySpec = {
  kind: 'object',
  optional: true,
  description:
    "Which versions of the model are loaded (Triton's version_policy): one of `all`, `latest` or `specific`; omitted = all.",
  fields: {
    all: { kind: 'boolean', description: '`all: true` loads every version offered (the default).' },
    latest: {
      kind: 'integer',
      min: 1,
      // Each version kept is a loaded model with its own instances.
      max: 256,
      description: 'Keep the N highest versions; loading a newer one drains and unloads the oldest.',
    },
    specific: {
      kind: 'array',
      minItems: 1,
      items: { kind: 'string', pattern: VERSION_PATTERN, patternHint: 'a version', description: 'A version.' },
      description: 'Load only these versions; others are refused.',
    },
  },
} as const satisfies FieldSpec;

export type VersionPolicy = { readonly all?: boolean; readonly latest?: number; readonly specific?: readonly string[] };

/** Per model name: the version policy, the default version and the traffic. */
export const modelPolicySpec = {
  kind: 'object',
  description: 'Policies of one model (all its versions).',
  fields: {
    version_policy: versionPolicySpec,
    default_version: {
      kind: 'string',
      pattern: VERSION_PATTERN,
      patternHint: 'a version',
      description:
        "The version that answers requests naming none (when no split applies); default: the first version loaded (in `--models` order; a store's from its lowest version up), so a version loaded beside it takes no traffic until set-default, a split or a canary gives it some.",
    },
    traffic: trafficSpec,
  },
} as const satisfies FieldSpec;

export interface ModelPolicy {
  readonly version_policy?: VersionPolicy;
  readonly default_version?: string;
  readonly traffic?: TrafficPolicy;
}

/** Problems a schema cannot express: a policy naming both forms, a split with no weight. */
export function modelPolicyProblems(policy: ModelPolicy, path: string): string[] {
  const problems: string[] = [];
  const forms = Object.keys(policy.version_policy ?? {});
  if (forms.length > 1)
    problems.push(`${path}.version_policy: give one of all, latest or specific, not ${forms.join(' and ')}`);
  if (policy.version_policy?.all === false)
    problems.push(`${path}.version_policy.all: only \`all: true\` means anything`);
  if (policy.traffic) problems.push(...trafficProblems(policy.traffic, `${path}.traffic`));
  return problems;
}

export function trafficProblems(traffic: TrafficPolicy, path: string): string[] {
  const split = traffic.split;
  if (split && Object.values(split).reduce((sum, weight) => sum + weight, 0) <= 0) {
    return [`${path}.split: at least one weight must be above 0`];
  }
  return [];
}
