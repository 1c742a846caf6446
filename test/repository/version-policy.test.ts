import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { compareVersions, describeVersionPolicy, selectVersions } from '../../src/repository/version-policy.js';
import { validateServerConfig } from '../../src/server/server-config.js';

test('versions compare as numbers where they are numbers', () => {
  assert.deepEqual(['10', '9', '1.10', '1.9', '2'].sort(compareVersions), ['1.9', '1.10', '2', '9', '10']);
});

test('no policy keeps every version, sorted and each once', () => {
  assert.deepEqual(selectVersions(undefined, ['3', '1', '2', '1']), { kept: ['1', '2', '3'], excluded: [] });
  assert.deepEqual(selectVersions({}, ['2', '1']), { kept: ['1', '2'], excluded: [] });
});

test('latest: N keeps the N highest versions, numerically', () => {
  assert.deepEqual(selectVersions({ latest: 2 }, ['1', '10', '9', '2']), { kept: ['9', '10'], excluded: ['1', '2'] });
  assert.deepEqual(selectVersions({ latest: 5 }, ['1', '2']), { kept: ['1', '2'], excluded: [] });
  assert.deepEqual(selectVersions({ latest: 1 }, []), { kept: [], excluded: [] });
});

test('specific keeps only the listed versions, listed or not offered', () => {
  assert.deepEqual(selectVersions({ specific: ['1', '3', '7'] }, ['1', '2', '3']), {
    kept: ['1', '3'],
    excluded: ['2'],
  });
});

test('describes the policy as the config spells it', () => {
  assert.equal(describeVersionPolicy({ latest: 2 }), 'latest: 2');
  assert.equal(describeVersionPolicy({ specific: ['1', '2'] }), 'specific: 1, 2');
  assert.equal(describeVersionPolicy(undefined), 'all');
});

test('kept and excluded split the offered versions; latest keeps only versions above every excluded one', () => {
  const version = fc.oneof(fc.nat(30).map(String), fc.stringMatching(/^[a-c0-9][a-c0-9.]{0,3}$/));
  fc.assert(
    fc.property(fc.array(version), fc.integer({ min: 1, max: 8 }), (versions, latest) => {
      const { kept, excluded } = selectVersions({ latest }, versions);
      assert.deepEqual([...kept, ...excluded].sort(), [...new Set(versions)].sort());
      assert.equal(kept.length, Math.min(latest, new Set(versions).size));
      for (const low of excluded) for (const high of kept) assert.ok(compareVersions(low, high) <= 0);
    }),
  );
});

test('server.yaml version_policy takes exactly one of all, latest or specific', () => {
  const config = (versionPolicy: unknown) =>
    validateServerConfig({ model_policies: { m: { version_policy: versionPolicy } } }, 'server.yaml');
  assert.deepEqual(selectVersions({ all: true }, ['2', '1']).kept, ['1', '2']);
  for (const [good, kept] of [
    [{ all: true }, ['1', '2', '3']],
    [{ latest: 1 }, ['3']],
    [{ specific: ['1'] }, ['1']],
    [{}, ['1', '2', '3']],
  ] as const) {
    const policy = config(good).model_policies?.m?.version_policy;
    assert.deepEqual(policy, good, 'kept as written');
    assert.deepEqual(selectVersions(policy, ['3', '1', '2']).kept, kept, JSON.stringify(good));
  }
  for (const [bad, message] of [
    [{ latest: 1, specific: ['1'] }, /give one of all, latest or specific, not latest and specific/],
    [{ all: true, latest: 2 }, /not all and latest/],
    [{ all: false }, /only `all: true`/],
    [{ latest: 0 }, /latest: expected a value from 1 to \d+, got 0/],
    ['all', /version_policy: expected a mapping/],
  ] as const) {
    assert.throws(() => config(bad), { code: 'BS_ERR_CONFIG_INVALID', message }, JSON.stringify(bad));
  }
});
