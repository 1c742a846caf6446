import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { errorClasses, type BatchserveError } from '../src/core/errors.js';

test('docs/errors.md lists exactly the error codes, with their exit codes and HTTP statuses', async () => {
  const doc = await readFile(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = new Map(
    [...doc.matchAll(/^\|\s*`(BS_ERR_[A-Z_]+)`\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|/gm)].map((m) => [
      m[1],
      [Number(m[2]), Number(m[3])],
    ]),
  );
  const actual = new Map(
    errorClasses.map((ErrorClass) => [ErrorClass.code, [ErrorClass.exitCode, ErrorClass.httpStatus]]),
  );
  assert.deepEqual(documented, actual);
  assert.equal(actual.size, errorClasses.length, 'codes are unique');
});

test("every error carries its class's code, exit code and HTTP status", () => {
  for (const ErrorClass of errorClasses) {
    const error = new (ErrorClass as new (...args: unknown[]) => BatchserveError)('x', [], []);
    assert.deepEqual(
      [error.code, error.exitCode, error.httpStatus],
      [ErrorClass.code, ErrorClass.exitCode, ErrorClass.httpStatus],
      ErrorClass.name,
    );
  }
});
