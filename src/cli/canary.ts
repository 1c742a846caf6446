import type { CanaryStatus } from '../traffic/canary.js';
import type { WindowFigures } from '../traffic/version-window.js';
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
  minAgreement?: string;
  agreementTolerance?: string;
  maxQualityDrop?: string;
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
    // Sent as typed: the server parses them, so the CLI and the API refuse a bad value alike.
    ...(options.minAgreement !== undefined ? { min_agreement: options.minAgreement } : {}),
    ...(options.agreementTolerance !== undefined ? { agreement_tolerance: options.agreementTolerance } : {}),
    ...(options.maxQualityDrop !== undefined ? { max_quality_drop: options.maxQualityDrop } : {}),
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
  const samples = [
    'candidate requests',
    ...(status.min_agreement ? ['mirrored answers'] : []),
    ...(status.max_quality_drop ? ['feedbacks per version'] : []),
  ];
  const needs =
    samples.length === 1
      ? `${status.min_requests} ${samples[0]}`
      : `${status.min_requests} each of ${samples.slice(0, -1).join(', ')} and ${samples.at(-1)}`;
  lines.push(
    `guardrails: ${guardrailsOf(status).join(', ')}; each step runs ${status.interval} and needs ${needs}` +
      (status.next_check_at ? `; next check ${status.next_check_at}` : ''),
  );
  const versions = Object.entries(status.live);
  if (versions.length > 0) lines.push(liveTable(status, versions));
  const history = createTable(['at', 'event', 'candidate share', 'note']);
  for (const event of status.history) {
    history.push([event.at, event.event.replace('_', ' '), `${event.weight}%`, event.reason ?? '']);
  }
  lines.push(history.toString());
  return `${lines.join('\n')}\n`;
}

function guardrailsOf(status: CanaryStatus): string[] {
  return [
    `error rate ≤ ${status.max_error_rate}`,
    ...(status.max_p99 ? [`p99 ≤ ${status.max_p99}`] : []),
    ...(status.min_agreement ? [`agreement ≥ ${status.min_agreement} (tolerance ${status.agreement_tolerance})`] : []),
    ...(status.max_quality_drop ? [`accuracy or mean reward at most ${status.max_quality_drop} below stable`] : []),
  ];
}

/** This step's figures per version; agreement and quality columns only where they say something. */
function liveTable(status: CanaryStatus, versions: [string, WindowFigures][]): string {
  const agreement = status.min_agreement !== null;
  const quality =
    status.max_quality_drop !== null || versions.some(([, figures]) => figures.labels > 0 || figures.rewards > 0);
  const table = createTable([
    'this step',
    'requests',
    'errors',
    'error rate',
    'p99',
    ...(agreement ? ['agreement'] : []),
    ...(quality ? ['accuracy', 'mean reward'] : []),
  ]);
  for (const [version, figures] of versions) {
    table.push([
      `${version} (${version === status.candidate ? 'candidate' : 'stable'})`,
      String(figures.requests),
      String(figures.errors),
      percent(figures.error_rate),
      figures.p99_ms === undefined ? '—' : `${figures.p99_ms.toFixed(1)} ms`,
      ...(agreement ? [agreementOf(figures)] : []),
      ...(quality ? qualityOf(figures) : []),
    ]);
  }
  return table.toString();
}

const percent = (share: number): string => `${(share * 100).toFixed(2)}%`;

function agreementOf({ compared, agreed, agreement }: WindowFigures): string {
  if (compared === undefined) return '—';
  return agreement === undefined ? '0 compared' : `${percent(agreement)} (${agreed} of ${compared})`;
}

function qualityOf({ labels, correct, accuracy, rewards, mean_reward: mean }: WindowFigures): string[] {
  return [
    accuracy === undefined ? '—' : `${percent(accuracy)} (${correct} of ${labels})`,
    mean === undefined ? '—' : `${Number(mean.toPrecision(3))} (${rewards})`,
  ];
}
