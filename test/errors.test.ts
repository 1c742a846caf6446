import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { ERRORS, errorClasses, type BatchserveError } from '../src/core/errors.js';

test('docs/errors.md lists exactly the error codes, with their exit codes, HTTP and gRPC statuses', async () => {
  const doc = await readFile(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = new Map(
    [...doc.matchAll(/^\|\s*`(BS_ERR_[A-Z_]+)`\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([A-Z_]+)\s*\|/gm)].map((m) => [
      m[1],
      [Number(m[2]), Number(m[3]), m[4]],
    ]),
  );
  const table = new Map(Object.entries(ERRORS).map(([code, [http, grpc, exit]]) => [code, [exit, http, grpc]]));
  assert.deepEqual(documented, table);
});

test('each code of the table has one error class, made from its line', () => {
  for (const ErrorClass of errorClasses) {
    const line = ERRORS[ErrorClass.code];
    assert.ok(line, `${ErrorClass.name}: add ${ErrorClass.code} to ERRORS in src/core/errors.ts`);
    const [http, grpc, exit] = line;
    assert.deepEqual([ErrorClass.httpStatus, ErrorClass.grpcStatus, ErrorClass.exitCode], [http, grpc, exit]);
  }
  assert.deepEqual(errorClasses.map((ErrorClass) => ErrorClass.code).sort(), Object.keys(ERRORS).sort());
});

test("every error carries its class's code, exit code, HTTP and gRPC status, and its class's name", () => {
  for (const ErrorClass of errorClasses) {
    const error = new (ErrorClass as new (...args: unknown[]) => BatchserveError)('x', [], []);
    assert.ok(error instanceof ErrorClass);
    assert.deepEqual(
      [error.name, error.code, error.exitCode, error.httpStatus, error.grpcStatus],
      [ErrorClass.name, ErrorClass.code, ErrorClass.exitCode, ErrorClass.httpStatus, ErrorClass.grpcStatus],
      ErrorClass.name,
    );
  }
});
