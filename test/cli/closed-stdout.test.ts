import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

/** Runs the CLI with its stdout a pipe closed before anything is written, as `| head` leaves it. */
function withClosedStdout(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

test('help into a closed pipe (`batchserve serve --help | head`) ends quietly with 0, no stack', async () => {
  for (const args of [['serve', '--help'], ['predict', '--help'], ['--help']]) {
    const { code, stderr } = await withClosedStdout(args);
    assert.equal(stderr, '', `${args.join(' ')}: ${stderr}`);
    assert.equal(code, 0, args.join(' '));
  }
});
