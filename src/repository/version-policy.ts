import type { VersionPolicy } from '../config/model-policy.js';

/** Versions compare as numbers where they are numbers: 10 comes after 9. */
export const compareVersions = (a: string, b: string): number => a.localeCompare(b, 'en', { numeric: true });

export interface VersionSelection {
  /** Lowest first, each once. */
  readonly kept: readonly string[];
  /** Lowest first, each once. */
  readonly excluded: readonly string[];
}

/**
 * Which of `versions` a policy keeps: the `latest` N highest, the `specific` ones listed, or
 * all of them when the policy names neither.
 */
export function selectVersions(policy: VersionPolicy | undefined, versions: Iterable<string>): VersionSelection {
  const sorted = [...new Set(versions)].sort(compareVersions);
  let keeps: (version: string, index: number) => boolean = () => true;
  if (policy?.latest !== undefined) {
    const first = sorted.length - policy.latest;
    keeps = (_version, index) => index >= first;
  } else if (policy?.specific !== undefined) {
    const listed = new Set(policy.specific);
    keeps = (version) => listed.has(version);
  }
  const kept: string[] = [];
  const excluded: string[] = [];
  sorted.forEach((version, index) => (keeps(version, index) ? kept : excluded).push(version));
  return { kept, excluded };
}

/** The policy as the config spells it, for messages: `latest: 2`, `specific: 1, 3`, `all`. */
export function describeVersionPolicy(policy: VersionPolicy | undefined): string {
  if (policy?.latest !== undefined) return `latest: ${policy.latest}`;
  if (policy?.specific !== undefined) return `specific: ${policy.specific.join(', ')}`;
  return 'all';
}
