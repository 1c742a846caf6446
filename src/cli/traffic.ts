import { UsageError } from '../core/errors.js';
import type { TrafficView } from '../traffic/traffic-control.js';
import { callManagement, managementTarget, printAnswer } from './management-client.js';
import type { ManagementTargetOptions } from './options.js';

export interface TrafficCommandOptions extends ManagementTargetOptions {
  split?: string[];
  stickyKey?: string;
  shadow?: string;
  shadowTolerance?: string;
}

/** Reads or replaces a model's traffic policy through the management API and prints it. */
export async function runTraffic(
  action: 'show' | 'set' | 'clear',
  model: string,
  options: TrafficCommandOptions,
): Promise<void> {
  const target = await managementTarget(options);
  const path = `/models/${encodeURIComponent(model)}/traffic`;
  const view =
    action === 'show'
      ? await callManagement(target, 'GET', path)
      : await callManagement(target, 'PUT', path, action === 'clear' ? {} : trafficBody(options));
  printAnswer(view as TrafficView, options.json, renderTraffic);
}

function trafficBody(options: TrafficCommandOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (options.split) {
    body.split = Object.fromEntries(
      options.split.map((entry) => {
        const match = /^([^=\s]+)=(\d+(?:\.\d+)?)$/.exec(entry);
        if (!match) throw new UsageError(`--split: expected version=weight, got "${entry}"`);
        return [match[1], Number(match[2])];
      }),
    );
  }
  if (options.stickyKey) body.sticky_key = options.stickyKey;
  if (options.shadow) body.shadow = options.shadow;
  if (options.shadowTolerance !== undefined) {
    const tolerance = Number(options.shadowTolerance);
    if (!(tolerance >= 0))
      throw new UsageError(`--shadow-tolerance: expected a number ≥ 0, got "${options.shadowTolerance}"`);
    body.shadow_tolerance = tolerance;
  }
  if (Object.keys(body).length === 0) {
    throw new UsageError('traffic set needs --split, --sticky-key or --shadow (traffic clear drops them all)');
  }
  return body;
}

export function renderTraffic(view: TrafficView): string {
  const versions = view.versions.map((entry) => `${entry.version} (${entry.state})`).join(', ');
  const lines = [`${view.model}: default version ${view.default_version ?? '—'}; loaded ${versions}`];
  if (view.split) {
    const total = Object.values(view.split).reduce((sum, weight) => sum + weight, 0);
    const shares = Object.entries(view.split)
      .map(([version, weight]) => `${version} ${Number(((100 * weight) / total).toFixed(1))}%`)
      .join(', ');
    const sticky = view.traffic?.sticky_key ? `sticky on ${view.traffic.sticky_key}` : 'random per request';
    lines.push(`split: ${shares} (${sticky}${view.canary === 'running' ? '; set by the running canary' : ''})`);
  } else {
    lines.push('split: none, the default version answers every request that names none');
  }
  if (view.traffic?.shadow)
    lines.push(`shadow: version ${view.traffic.shadow} (tolerance ${view.traffic.shadow_tolerance})`);
  if (view.canary) lines.push(`canary: ${view.canary.replace('_', ' ')} (batchserve canary status ${view.model})`);
  return `${lines.join('\n')}\n`;
}
