import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import fc from 'fast-check';
import type { ModelRepository } from '../../src/repository/model-repository.js';
import type { TrafficPolicy } from '../../src/config/model-policy.js';
import { VersionRouter } from '../../src/traffic/version-router.js';
import { loadedVersions, requestWith, sharedVersions } from './loaded-versions.js';

/** Affine 1, 1.5, 2 and 3 for the tests that only route; the one that unloads a version loads its own. */
const affine = sharedVersions(['1', '1.5', '2', '3']);

const URL_NO_QUERY = new URL('http://localhost/v2/models/affine/infer');
const KEY_COUNT = 20_000;
/** One request per user, built once: routing reads only the header. */
const USERS: readonly IncomingMessage[] = Array.from({ length: KEY_COUNT }, (_, user) =>
  requestWith({ 'x-user-id': `user-${user}` }),
);

/**
 * How far an observed share may stray from `p` over `n` independent draws: 4.5 standard
 * deviations of a binomial, about one false alarm in 150,000 checks for a fair router.
 */
const bound = (p: number, n: number): number => 4.5 * Math.sqrt((p * (1 - p)) / n);

function stickyRouter(repository: ModelRepository, split: Record<string, number>, random?: () => number) {
  const router = new VersionRouter(repository, random);
  router.setTraffic('affine', { split, sticky_key: 'header:X-User-Id', shadow_tolerance: 0 });
  return router;
}

const routeAll = (router: VersionRouter, requests: readonly IncomingMessage[]): string[] =>
  requests.map((req) => router.route('affine', req, URL_NO_QUERY).version);

/** Each version's observed share must lie within `bound` of weight ÷ total. */
function assertShares(versions: readonly string[], expected: Record<string, number>, label: string): void {
  const total = Object.values(expected).reduce((sum, weight) => sum + weight, 0);
  const counts = new Map<string, number>();
  for (const version of versions) counts.set(version, (counts.get(version) ?? 0) + 1);
  assert.deepEqual(
    [...counts.keys()].sort(),
    Object.keys(expected)
      .filter((version) => (expected[version] as number) > 0)
      .sort(),
    `${label}: versions used ${JSON.stringify(Object.fromEntries(counts))}`,
  );
  for (const [version, weight] of Object.entries(expected)) {
    const p = weight / total;
    const share = (counts.get(version) ?? 0) / versions.length;
    assert.ok(
      Math.abs(share - p) <= bound(p, versions.length),
      `${label}: version ${version} got ${share}, expected ${p} ± ${bound(p, versions.length).toFixed(4)}`,
    );
  }
}

/** mulberry32: a small seeded generator, so the unkeyed draws are the same on every run. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 0x1_0000_0000;
  };
}

test('sticky splits of 90/10 and 70/20/10 give each version its share of 20,000 keys, each key one version', async () => {
  const { repository } = await affine();
  const splits: Record<string, number>[] = [
    { '1': 90, '2': 10 },
    { '1': 10, '2': 90 },
    { '1': 70, '2': 20, '3': 10 },
  ];
  for (const split of splits) {
    const router = stickyRouter(repository, split);
    const first = routeAll(router, USERS);
    assertShares(first, split, JSON.stringify(split));
    assert.deepEqual(routeAll(router, USERS), first, 'every key meets the same version again');
  }
});

/** The routes of `users` before and after version `raised` (index into `weights`) gains `extra`. */
function raise(
  repository: ModelRepository,
  users: readonly IncomingMessage[],
  weights: readonly number[],
  raised: number,
  extra: number,
): { was: string[]; now: string[]; label: string } {
  const split = (values: readonly number[]): Record<string, number> =>
    Object.fromEntries(values.map((value, index) => [String(index + 1), value]));
  const before = split(weights);
  const after = split(weights.map((value, index) => (index === raised ? value + extra : value)));
  return {
    was: routeAll(stickyRouter(repository, before), users),
    now: routeAll(stickyRouter(repository, after), users),
    label: `version ${raised + 1} raised: ${JSON.stringify(before)} → ${JSON.stringify(after)}`,
  };
}

test('raising a version’s weight only moves keys towards it, with two versions or three', async () => {
  const { repository } = await affine();
  const users = USERS.slice(0, 2_000);
  const weight = fc.integer({ min: 0, max: 100 });
  const someWeight = (count: number) =>
    fc.array(weight, { minLength: count, maxLength: count }).filter((weights) => weights.some((value) => value > 0));
  for (const count of [2, 3]) {
    fc.assert(
      fc.property(
        someWeight(count),
        fc.integer({ min: 0, max: count - 1 }),
        fc.integer({ min: 1, max: 100 }),
        (weights, raised, extra) => {
          const { was, now, label } = raise(repository, users, weights, raised, extra);
          const target = String(raised + 1);
          users.forEach((_, user) => {
            if (was[user] !== now[user])
              assert.equal(now[user], target, `user-${user} left for ${now[user]}; ${label}`);
          });
        },
      ),
      { numRuns: 100 },
    );
  }
});

test('a version that is not ready is skipped and its weight shared out in proportion among the ready ones', async (t) => {
  const { repository } = await loadedVersions(t, ['1', '2', '3']);
  const router = stickyRouter(repository, { '1': 70, '2': 20, '3': 10 });
  const whileReady = routeAll(router, USERS);
  // Unloading the model itself, not through the repository, leaves it listed but no longer
  // ready: the state a version is in while it drains away.
  await repository.get('affine', '2').unload();
  assert.equal(repository.peek('affine', '2')?.state, 'unloaded');
  const after = routeAll(router, USERS);
  assertShares(after, { '1': 70, '3': 10 }, 'keyed, 2 not ready');
  // Only the users version 2 had move; everyone else keeps their version.
  whileReady.forEach((version, user) => {
    if (version !== '2') assert.equal(after[user], version, `user-${user} moved from ${version}`);
  });
  // The default (1) is not the version the draining one's share goes to: nothing falls back to it.
  repository.setDefault('affine', '1');
  const unkeyed = Array.from({ length: KEY_COUNT }, () => requestWith());
  const seeded = stickyRouter(repository, { '1': 70, '2': 20, '3': 10 }, seededRandom(7));
  assertShares(routeAll(seeded, unkeyed), { '1': 70, '3': 10 }, 'unkeyed, 2 not ready');
  // With no ready version left in the split, the default version answers, keyed or not.
  const onlyTwo = stickyRouter(repository, { '2': 1, '3': 0 }, () => 0.5);
  assert.deepEqual(routeAll(onlyTwo, [USERS[0] as IncomingMessage, requestWith()]), ['1', '1']);
  // Nor does a shadow that is not ready get copies.
  const shadowing = new VersionRouter(repository);
  shadowing.setTraffic('affine', { shadow: '2', shadow_tolerance: 0 });
  assert.equal(shadowing.shadowFor(repository.get('affine', '1')), undefined);
});

test('requests without the sticky key are split at random in proportion to the weights', async () => {
  const { repository } = await affine();
  const withoutKey = [requestWith(), requestWith({ 'x-user-id': '' }), requestWith({ 'x-other': 'user-1' })];
  const draws = Array.from(
    { length: KEY_COUNT },
    (_, index) => withoutKey[index % withoutKey.length] as IncomingMessage,
  );
  const splits: Record<string, number>[] = [
    { '1': 90, '2': 10 },
    { '1': 70, '2': 20, '3': 10 },
  ];
  for (const split of splits) {
    assertShares(
      routeAll(stickyRouter(repository, split, seededRandom(42)), draws),
      split,
      `unkeyed ${JSON.stringify(split)}`,
    );
  }
  // The random point decides alone, and each version owns its interval up to, not including,
  // the next one's start: weights 2:1:1 give 1 [0, 0.5), 2 [0.5, 0.75), 3 [0.75, 1).
  const points = [0, 0.25, 0.4999, 0.5, 0.7499, 0.75, 0.9999];
  let next = 0;
  const pinned = stickyRouter(repository, { '1': 2, '2': 1, '3': 1 }, () => points[next++] as number);
  assert.deepEqual(
    routeAll(
      pinned,
      points.map(() => requestWith()),
    ),
    ['1', '1', '1', '2', '2', '3', '3'],
  );
});

test('an unkeyed point at the very end of the weights goes to the last ready version with weight', async () => {
  const { repository } = await affine();
  repository.setDefault('affine', '3');
  for (const [split, expected] of [
    [{ '1': 1, '2': 1 }, '2'],
    [{ '1': 1, '2': 0 }, '1'],
    [{ '1': 0, '2': 1, '3': 0 }, '2'],
  ] as const) {
    const router = new VersionRouter(repository, () => 1);
    router.setTraffic('affine', { split, shadow_tolerance: 0 });
    assert.equal(router.route('affine', requestWith(), URL_NO_QUERY).version, expected, JSON.stringify(split));
  }
});

test('without a split the default version answers; a canary’s split wins over the configured one while it runs', async () => {
  const { repository } = await affine();
  repository.setDefault('affine', '3');
  const router = new VersionRouter(repository, () => 0);
  assert.equal(router.route('affine', requestWith(), URL_NO_QUERY).version, '3');
  assert.equal(router.effectiveSplit('affine'), undefined);
  router.setTraffic('affine', { sticky_key: 'header:x-user-id', shadow_tolerance: 0 });
  assert.equal(router.route('affine', USERS[0] as IncomingMessage, URL_NO_QUERY).version, '3');
  router.setTraffic('affine', { split: { '1': 1 }, shadow_tolerance: 0 });
  router.setCanarySplit('affine', { '1': 0, '2': 100 });
  assert.deepEqual(router.effectiveSplit('affine'), { '1': 0, '2': 100 });
  assert.equal(router.route('affine', requestWith(), URL_NO_QUERY).version, '2');
  router.setCanarySplit('affine', undefined);
  assert.deepEqual(router.effectiveSplit('affine'), { '1': 1 });
  assert.equal(router.route('affine', requestWith(), URL_NO_QUERY).version, '1');
  router.setTraffic('affine', undefined);
  assert.equal(router.traffic('affine'), undefined);
  assert.equal(router.route('affine', requestWith(), URL_NO_QUERY).version, '3');
  // A canary alone, with no traffic policy, routes too.
  router.setCanarySplit('affine', { '2': 1 });
  assert.equal(router.route('affine', requestWith(), URL_NO_QUERY).version, '2');
});

test('sticky keys: header names match in any case, query names exactly; the first of repeated headers counts', async () => {
  const { repository } = await affine();
  const split = { '1': 1, '2': 1, '3': 1 };
  const byHeader = new VersionRouter(repository, () => assert.fail('a keyed request is never placed at random'));
  byHeader.setTraffic('affine', { split, sticky_key: 'header:X-User-Id', shadow_tolerance: 0 });
  const byQuery = new VersionRouter(repository, () => assert.fail('a keyed request is never placed at random'));
  byQuery.setTraffic('affine', { split, sticky_key: 'query:User', shadow_tolerance: 0 });
  const users = Array.from({ length: 60 }, (_, user) => `user-${user}`);
  const viaHeader = users.map(
    (user) => byHeader.route('affine', requestWith({ 'x-user-id': user }), URL_NO_QUERY).version,
  );
  const viaQuery = users.map(
    (user) => byQuery.route('affine', requestWith(), new URL(`http://localhost/infer?User=${user}`)).version,
  );
  assert.deepEqual(viaQuery, viaHeader, 'one key meets one version, wherever it is read from');
  assert.deepEqual(new Set(viaHeader), new Set(['1', '2', '3']));
  const repeated = requestWith();
  repeated.headers = { 'x-user-id': [users[0], users[1]] } as unknown as IncomingMessage['headers'];
  assert.equal(byHeader.route('affine', repeated, URL_NO_QUERY).version, viaHeader[0]);
  // A query key in another case, or a header key in the query, is no key: placed at random.
  let draws = 0;
  const counting = new VersionRouter(repository, () => (draws++, 0));
  counting.setTraffic('affine', { split, sticky_key: 'query:User', shadow_tolerance: 0 });
  counting.route('affine', requestWith({ user: 'a' }), new URL('http://localhost/infer?user=a'));
  counting.route('affine', requestWith(), new URL('http://localhost/infer?User='));
  assert.equal(draws, 2);
});

test('a shadow gets copies of what the other versions serve, with its tolerance, never of its own answers', async () => {
  const { repository } = await affine();
  const router = new VersionRouter(repository);
  assert.equal(router.shadowFor(repository.get('affine', '1')), undefined);
  router.setTraffic('affine', { shadow: '2', shadow_tolerance: 0.25 });
  const target = router.shadowFor(repository.get('affine', '1'));
  assert.equal(target?.model, repository.get('affine', '2'));
  assert.equal(target?.tolerance, 0.25);
  assert.equal(router.shadowFor(repository.get('affine', '2')), undefined);
  router.setTraffic('affine', { shadow: '2' } as TrafficPolicy);
  assert.equal(router.shadowFor(repository.get('affine', '3'))?.tolerance, 0, 'no tolerance given is exact');
  router.setTraffic('affine', { shadow: '7', shadow_tolerance: 0 });
  assert.equal(router.shadowFor(repository.get('affine', '3')), undefined, 'a shadow not loaded gets nothing');
});

test('unkeyed points are laid out in version order, whatever order the split names the versions in', async () => {
  const { repository } = await affine();
  // JavaScript lists integer-like keys first: {"2", "1.5"} iterates as 2, 1.5 either way.
  for (const split of [
    { '2': 1, '1.5': 1 },
    { '1.5': 1, '2': 1 },
  ]) {
    const first = new VersionRouter(repository, () => 0);
    first.setTraffic('affine', { split, shadow_tolerance: 0 });
    assert.equal(first.route('affine', requestWith(), URL_NO_QUERY).version, '1.5', JSON.stringify(split));
    const second = new VersionRouter(repository, () => 0.5);
    second.setTraffic('affine', { split, shadow_tolerance: 0 });
    assert.equal(second.route('affine', requestWith(), URL_NO_QUERY).version, '2', JSON.stringify(split));
  }
});
