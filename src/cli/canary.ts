import type { CanaryStatus } from '../traffic/canary.js';
import { createTable } from '../core/table.js';
import { callManagement, managementTarget, printAnswer } from './management-client.js';
import { integerOption, type ManagementTargetOptions } from './options.js';

export interface CanaryCommandOptions extends ManagementTargetOptions {
  version?: string;
  steps?: string;
  interval?: string;
  maxErrorRate?: string;
  maxP99?: string;
  minRequests?: string;
}

/** Calls the management API's canary routes and prints the canary it answers with. */
export async function runCanary(
  action: 'start' | 'status' | 'rollback' | 'promote',
  model: string,
  options: CanaryCommandOptions,
): Promise<void> {
  const target = await managementTarget(options);
  const path = `/models/${encodeURIComponent(model)}/canary`;
  let status: unknown;
  if (action === 'status') status = await callManagement(target, 'GET', path);
  else if (action === 'start') status = await callManagement(target, 'POST', path, startBody(options));
  else status = await callManagement(target, 'POST', `${path}/${action}`);
  printAnswer(status as CanaryStatus, options.json, renderCanaryStatus);
}

function startBody(options: CanaryCommandOptions): Record<string, unknown> {
  return {
    version: options.version,
    steps: options.steps,
    interval: options.interval,
    max_error_rate: options.maxErrorRate,
    ...(options.maxP99 !== undefined ? { max_p99: options.maxP99 } : {}),
    min_requests: integerOption(options.minRequests ?? '10', '--min-requests', 1),
  };
}

export function renderCanaryStatus(status: CanaryStatus): string {
  const lines: string[] = [];
  const headline =
    status.state === 'running'
      ? `step ${status.step} of ${status.steps.length}: version ${status.candidate} gets ${status.weight}%, version ${status.stable} the rest`
      : status.state === 'promoted'
        ? `promoted: version ${status.candidate} is the default and takes all traffic`
        : `rolled back: version ${status.stable} takes all traffic`;
  lines.push(`canary of ${status.model} (stable ${status.stable} → candidate ${status.candidate}): ${headline}`);
  if (status.reason) lines.push(`why: ${status.reason}`);
  lines.push(
    `guardrails: error rate ≤ ${status.max_error_rate}${status.max_p99 ? `, p99 ≤ ${status.max_p99}` : ''}; each step runs ${status.interval} and needs ${status.min_requests} candidate requests` +
      (status.next_check_at ? `; next check ${status.next_check_at}` : ''),
  );
  const versions = Object.entries(status.live);
  if (versions.length > 0) {
    const table = createTable(['this step', 'requests', 'errors', 'error rate', 'p99']);
    for (const [version, figures] of versions) {
      table.push([
        `${version} (${version === status.candidate ? 'candidate' : 'stable'})`,
        String(figures.requests),
        String(figures.errors),
        `${(figures.error_rate * 100).toFixed(2)}%`,
        figures.p99_ms === undefined ? '—' : `${figures.p99_ms.toFixed(1)} ms`,
      ]);
    }
    lines.push(table.toString());
  }
  const history = createTable(['at', 'event', 'candidate share', 'note']);
  for (const event of status.history) {
    history.push([event.at, event.event.replace('_', ' '), `${event.weight}%`, event.reason ?? '']);
  }
  lines.push(history.toString());
  return `${lines.join('\n')}\n`;
}
