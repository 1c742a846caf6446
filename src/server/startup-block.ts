import type { LoadedModel } from '../repository/loaded-model.js';
import { BATCHSERVE_VERSION } from '../version.js';
import type { ServerConfig } from './server-config.js';
import type { ApiAddresses, BatchServer } from './server.js';

/** The line after which the block lists models; the URLs are all known by then. */
const MODELS_HEADING = '  models\n';

/** What `serve` prints once it listens: where each API is and what each model is. */
export function renderStartupBlock(server: BatchServer, config: ServerConfig): string {
  const { urls } = server;
  const auth =
    server.token === undefined
      ? 'NO AUTH'
      : server.keyFile
        ? `bearer token in ${server.keyFile}`
        : 'bearer token from config';
  const lines = [
    `batchserve ${BATCHSERVE_VERSION} serving on ${config.host}`,
    `  inference   ${urls.inference}   KServe v2 /v2/…, TorchServe /predictions/…`,
    `  management  ${urls.management}   /models (${auth})`,
    `  metrics     ${urls.metrics}/metrics`,
    '  models',
    ...server.repository.list().map((model) => `    ${describeModel(model)}`),
    ...server.startupFailures.map((failure) => `    FAILED ${failure.spec}: ${failure.message}`),
    '',
  ];
  return `${lines.join('\n')}\n`;
}

function describeModel(model: LoadedModel): string {
  const { config } = model;
  const batching = config.dynamic_batching;
  const devices = model
    .devices()
    .map((device) => `${model.instances.filter((i) => i.device === device).length}×${device}`);
  const batch =
    config.max_batch_size > 0
      ? `max_batch_size ${config.max_batch_size}, delay ${batching.max_queue_delay} µs, preferred [${batching.preferred_batch_sizes.join(', ')}], queue ${batching.max_queue_size}`
      : 'no batching';
  return `${model.name} v${model.version}  ${model.manifest.model.handler} handler  ${devices.join(' ')}  ${batch}  (loaded in ${model.loadSeconds.toFixed(2)} s)`;
}

/**
 * The URLs in a start-up block, for programs that run `serve` as a child (bench, tests);
 * undefined until the block has been printed up to its models heading.
 */
export function parseStartupUrls(output: string): ApiAddresses | undefined {
  if (!output.includes(MODELS_HEADING)) return undefined;
  const url = (name: string): string => new RegExp(`${name}\\s+(http://\\S+)`).exec(output)?.[1] ?? '';
  return { inference: url('inference'), management: url('management'), metrics: url('metrics') };
}
