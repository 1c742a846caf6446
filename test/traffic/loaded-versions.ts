import { Socket } from 'node:net';
import { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { ServerMetrics } from '../../src/metrics/server-metrics.js';
import { ModelRepository } from '../../src/repository/model-repository.js';
import { packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/**
 * A real repository holding the affine model in the given versions (real archives, real
 * sessions), unloaded when the test ends. Routing and canaries only read which versions are
 * loaded and ready, but the real thing costs a few hundred milliseconds, so no stand-in.
 */
export async function loadedVersions(
  t: TestContext,
  versions: readonly string[],
): Promise<{ repository: ModelRepository; metrics: ServerMetrics }> {
  const root = await tempDir(t);
  const metrics = new ServerMetrics({ collectProcessMetrics: false });
  const repository = new ModelRepository({ workRoot: root, metrics });
  t.after(() => repository.unloadAll());
  for (const version of versions) {
    await repository.load(await packAffine(join(root, `v${version}`), { version, offset: Number(version) }));
  }
  return { repository, metrics };
}

/** A request as the HTTP server hands it over, carrying `headers`. */
export function requestWith(headers: Record<string, string> = {}): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  req.headers = headers;
  return req;
}
