import { readFile, writeFile } from 'node:fs/promises';
import { UsageError } from '../core/errors.js';
import { runOpenAiLoad, type OpenAiApi } from '../bench/openai-load.js';
import { renderOpenAiTable } from '../bench/openai-report.js';
import { durationOption, integerOption } from './options.js';
import { startSpinner } from './spinner.js';
import { readTlsClient } from './tls-options.js';

export interface OpenAiBenchOptions {
  url?: string;
  model?: string;
  openai: OpenAiApi;
  concurrency?: string[];
  maxTokens: string;
  tokenDistribution: 'uniform' | 'log-uniform';
  prompt: string;
  systemPrompt?: string;
  responseFormat?: string;
  duration: string;
  warmup: string;
  json?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** "64" or "8-256": the range each request's max_tokens is drawn from. */
function maxTokensRange(value: string): [number, number] {
  const match = /^(\d+)(?:-(\d+))?$/.exec(value.trim());
  const low = Number(match?.[1]);
  const high = match?.[2] === undefined ? low : Number(match[2]);
  if (!match || low < 1 || high < low) {
    throw new UsageError(`--max-tokens: expected a count or a range such as 8-256, got ${JSON.stringify(value)}`);
  }
  return [low, high];
}

/** --response-format: json_object, or a file holding a JSON schema. */
async function responseFormat(value: string): Promise<Record<string, unknown>> {
  if (value === 'json_object') return { type: 'json_object' };
  let schema: unknown;
  try {
    schema = JSON.parse(await readFile(value, 'utf8'));
  } catch (error) {
    throw new UsageError(`--response-format: expected json_object or a JSON schema file, ${(error as Error).message}`);
  }
  return { type: 'json_schema', json_schema: { name: 'bench', schema, strict: true } };
}

/** `bench --openai …`: a concurrency sweep of a running server's OpenAI routes. */
export async function runOpenAiBench(archive: string | undefined, options: OpenAiBenchOptions): Promise<void> {
  if (archive || !options.url || !options.model) {
    throw new UsageError('--openai drives a running server: give --url and --model, not an archive');
  }
  if (!options.concurrency?.length) throw new UsageError('--openai needs --concurrency levels, e.g. 1,8,32');
  const tls = await readTlsClient(options);
  const spinner = startSpinner('starting');
  let points;
  try {
    points = await runOpenAiLoad({
      url: options.url,
      model: options.model,
      api: options.openai,
      concurrency: options.concurrency.map((level) => integerOption(level, '--concurrency', 1)),
      maxTokens: maxTokensRange(options.maxTokens),
      distribution: options.tokenDistribution,
      prompt: options.prompt,
      ...(options.systemPrompt !== undefined ? { systemPrompt: options.systemPrompt } : {}),
      ...(options.responseFormat !== undefined ? { responseFormat: await responseFormat(options.responseFormat) } : {}),
      warmupMs: durationOption(options.warmup, '--warmup') / 1000,
      durationMs: durationOption(options.duration, '--duration') / 1000,
      seed: 1,
      ...(tls ? { tls } : {}),
      onProgress: (text) => (spinner.text = text),
    });
  } finally {
    spinner.stop();
  }
  process.stdout.write(`${renderOpenAiTable(options.openai, points)}\n`);
  if (options.json) {
    await writeFile(
      options.json,
      `${JSON.stringify({ url: options.url, model: options.model, api: options.openai, points }, null, 2)}\n`,
    );
    process.stderr.write(`wrote ${options.json}\n`);
  }
}
