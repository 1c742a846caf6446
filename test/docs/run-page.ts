import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { parseStartupUrls } from '../../src/server/startup-block.js';
import { PageShell, REPO } from './page-shell.js';
import { mismatch, shellBlocks, type Command } from './shell-blocks.js';

/** Longest a command may take; the slowest the docs show (the A/B walkthrough's 4,000 requests) takes under a minute. */
const COMMAND_TIMEOUT_MS = 180_000;
/** Longest a `serve` may take to print its start-up block. */
const STARTUP_TIMEOUT_MS = 60_000;

const SERVE = /\b(?:batchserve|bin\/batchserve\.js)\s+serve\b/;
const IN_BACKGROUND = /[^&]&\s*(?:#.*)?$/;
/** A comment after the command (one with no quote in it, so not inside a string). */
const TRAILING_COMMENT = /\s+#[^'"\n]*$/;
/** What must never run here, marker or not: it would reinstall the shared node_modules, or run this suite inside itself. */
const NEVER = /\bnpm (?:ci|install|i|test|run test)\b/;

/**
 * Every shell block of `page` (a path from the repository root), each as a subtest, in one
 * shell: a block marked skip is reported as skipped with its reason, any other must run
 * with status 0 and print what the page shows.
 */
export async function runPage(t: TestContext, page: string): Promise<void> {
  const blocks = shellBlocks(await readFile(join(REPO, page), 'utf8'));
  assert.ok(blocks.length > 0, `${page} has no shell blocks`);
  let opened: PageShell | undefined;
  for (const block of blocks) {
    const name = `${page}:${block.line}`;
    if (block.skip !== undefined) {
      await t.test(name, { skip: block.skip }, () => {});
      continue;
    }
    if (opened === undefined) {
      const started = await PageShell.open();
      t.after(() => started.close());
      opened = started;
    }
    const shell = opened;
    await t.test(name, async () => {
      for (const command of block.commands) {
        assert.doesNotMatch(command.text, NEVER, `${page}:${command.line} must be marked skip`);
        // curl's status is 0 whatever the HTTP answer: only its output says whether it worked.
        if (/^curl\b/.test(command.text) && command.shown.length === 0) {
          assert.fail(`${page}:${command.line}: a curl command shows its output (# → …)`);
        }
      }
      if (block.before !== undefined) {
        const ran = await shell.run(block.before, COMMAND_TIMEOUT_MS);
        assert.equal(ran.status, 0, `the docs-test before commands of ${name} failed:\n${await ran.output()}`);
      }
      for (const command of block.commands) await runCommand(shell, page, command);
    });
  }
}

async function runCommand(shell: PageShell, page: string, command: Command): Promise<void> {
  const where = `${page}:${command.line}: ${command.text}`;
  const text = shell.toRun(command.text);
  if (SERVE.test(text) && !IN_BACKGROUND.test(text)) {
    // A server in the foreground runs until the reader stops it: SIGTERM, which serve takes
    // as it takes Ctrl-C's SIGINT (a background job of a script ignores SIGINT).
    const started = await shell.run(`${text.replace(TRAILING_COMMENT, '')} &`, COMMAND_TIMEOUT_MS);
    await startup(shell, started.lastJob, started.output, where);
    const stopped = await shell.run(`kill ${started.lastJob}; wait ${started.lastJob}`, COMMAND_TIMEOUT_MS);
    assert.equal(stopped.status, 0, `${where}\nexited with ${stopped.status} when stopped:\n${await started.output()}`);
    return;
  }
  const ran = await shell.run(text, COMMAND_TIMEOUT_MS);
  if (SERVE.test(text)) await startup(shell, ran.lastJob, ran.output, where);
  const output = shell.asShown(await ran.output());
  assert.equal(ran.status, 0, `${where}\nexited with ${ran.status}:\n${tail(output)}`);
  const wrong = mismatch(command.shown, output);
  assert.equal(
    wrong,
    undefined,
    `${where}\nshows:\n${command.shown.join('\n')}\nbut ${wrong ?? ''}; it printed:\n${tail(output)}`,
  );
}

/** Waits, as a reader does, for the server started in the background to print its start-up block. */
async function startup(shell: PageShell, pid: number, output: () => Promise<string>, where: string): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    const text = await output();
    if (parseStartupUrls(text)) return;
    let alive = true;
    try {
      process.kill(pid, 0);
    } catch {
      alive = false;
    }
    assert.ok(alive, `${where}\nthe server exited before it served:\n${tail(shell.asShown(text))}`);
    assert.ok(
      Date.now() < deadline,
      `${where}\nno start-up block after ${STARTUP_TIMEOUT_MS / 1000} s:\n${tail(text)}`,
    );
    await new Promise((wake) => setTimeout(wake, 100));
  }
}

function tail(text: string): string {
  return text.length > 4000 ? `…${text.slice(-4000)}` : text;
}
