import { createTable } from '../core/table.js';
import type { OpenAiApi, OpenAiPoint } from './openai-load.js';

const ms = (value: number): string => value.toFixed(value < 10 ? 2 : 1);

/** One row a concurrency level: what GenAI-Perf prints for generation, and errors. */
export function renderOpenAiTable(api: OpenAiApi, points: readonly OpenAiPoint[]): string {
  const streamed = api !== 'embeddings';
  const table = createTable([
    'concurrency',
    'req/s',
    streamed ? 'tokens/s' : 'input tokens/s',
    'p50 ms',
    'p99 ms',
    ...(streamed ? ['TTFT p50', 'TTFT p99', 'ITL p50', 'ITL p99'] : []),
    'errors',
  ]);
  for (const point of points) {
    const errors = Object.values(point.errors).reduce((sum, count) => sum + count, 0);
    table.push([
      String(point.concurrency),
      point.requestsPerSecond.toFixed(1),
      point.tokensPerSecond.toFixed(0),
      ms(point.latencyMs.p50),
      ms(point.latencyMs.p99),
      ...(streamed && point.timeToFirstTokenMs && point.interTokenMs
        ? [
            ms(point.timeToFirstTokenMs.p50),
            ms(point.timeToFirstTokenMs.p99),
            ms(point.interTokenMs.p50),
            ms(point.interTokenMs.p99),
          ]
        : []),
      errors === 0 ? '0' : `${errors} (${Object.keys(point.errors).join(', ')})`,
    ]);
  }
  return table.toString();
}
