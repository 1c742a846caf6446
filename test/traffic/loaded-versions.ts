import { Socket } from 'node:net';
import { IncomingMessage } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, type TestContext } from 'node:test';
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

/**
 * One real repository holding the affine model in `versions`, loaded once for a whole test
 * file and unloaded after its last test: for tests that only route, set defaults and run
 * canaries, so each pays for no load of its own. Tests that unload a version need their own
 * (`loadedVersions`). Call it at the top level of the file.
 */
export function sharedVersions(
  versions: readonly string[],
): () => Promise<{ repository: ModelRepository; metrics: ServerMetrics }> {
  let loading: Promise<{ repository: ModelRepository; metrics: ServerMetrics; root: string }> | undefined;
  after(async () => {
    if (loading === undefined) return;
    const { repository, root } = await loading;
    await repository.unloadAll();
    await rm(root, { recursive: true, force: true });
  });
  return async () => {
    loading ??= (async () => {
      const root = await mkdtemp(join(tmpdir(), 'batchserve-test-'));
      const metrics = new ServerMetrics({ collectProcessMetrics: false });
      const repository = new ModelRepository({ workRoot: root, metrics });
      for (const version of versions) {
        await repository.load(await packAffine(join(root, `v${version}`), { version, offset: Number(version) }));
      }
      return { repository, metrics, root };
    })();
    const { repository, metrics } = await loading;
    return { repository, metrics };
  };
}
