import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { rawZip } from '../fixtures/raw-zip.js';
import { tempDir } from '../fixtures/temp.js';
import { runCli as cli } from '../fixtures/cli.js';

// The reported bomb in small: 48 entries of 1 MiB of zeros, each under the per-entry ratio
// floor (32 MiB), the whole about a thousand times its ~50 KB. Refused from the central
// directory by verify and unpack; --max-expansion raises the archive-wide ratio.

const MiB = 1024 ** 2;

test('verify and unpack refuse a bomb spread over entries under the per-entry limits', async (t) => {
  const dir = await tempDir(t);
  const bomb = join(dir, 'bomb.mar');
  const entries = Array.from({ length: 48 }, (_, index) => ({
    name: `part-${index}.bin`,
    data: Buffer.alloc(MiB),
    method: 'deflate' as const,
  }));
  await writeFile(bomb, rawZip(entries));
  for (const args of [
    ['verify', bomb],
    ['unpack', bomb, '--output', join(dir, 'out')],
  ]) {
    const run = await cli(['model-archive', ...args]);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
    assert.match(run.stderr.trimEnd(), /over 200 times its \d+ bytes.*\[BS_ERR_ARCHIVE_TOO_LARGE\]$/);
  }
  assert.equal(existsSync(join(dir, 'out')), false, 'unpack wrote nothing');

  // Allowed a higher ratio, the archive is read on, and fails for what it is: no manifest.
  const allowed = await cli(['model-archive', 'unpack', bomb, '--output', join(dir, 'out'), '--max-expansion', '5000']);
  assert.doesNotMatch(allowed.stderr, /BS_ERR_ARCHIVE_TOO_LARGE/, allowed.stderr);
  const bad = await cli(['model-archive', 'verify', bomb, '--max-expansion', '0']);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /--max-expansion/);
});
