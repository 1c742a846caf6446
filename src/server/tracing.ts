import type { RequestTracing } from './request-tracing.js';
import type { TracingConfig } from './server-config.js';
import { TraceSettings } from './trace-settings.js';

/**
 * Whether requests are traced, and where the traces go. Off unless an endpoint is set (serve
 * --otlp-endpoint, or the standard OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT); then the OpenTelemetry
 * SDK is loaded (request-tracing.ts) and the inference call asks it for each request. Off, the
 * SDK is never loaded and nothing is made.
 */
export interface TracingPlan {
  /** The traces URL; undefined: the exporter reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT itself. */
  readonly url: string | undefined;
  readonly ratio: number;
}

/** What serve's options and the OTEL_* variables ask for; undefined when tracing is off. */
export function tracingPlan(
  config: TracingConfig | undefined,
  env: NodeJS.ProcessEnv = process.env,
): TracingPlan | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return undefined;
  const base = config?.otlp_endpoint;
  // As OTEL_EXPORTER_OTLP_ENDPOINT means it: the base URL, the signal's path added.
  const url = base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`;
  if (url === undefined && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT && !env.OTEL_EXPORTER_OTLP_ENDPOINT)
    return undefined;
  return { url, ratio: config?.sample_ratio ?? ratioFromEnv(env) };
}

/** OTEL_TRACES_SAMPLER's ratio for requests without a sampled parent (the parent is always followed here). */
function ratioFromEnv(env: NodeJS.ProcessEnv): number {
  const sampler = env.OTEL_TRACES_SAMPLER?.trim()
    .toLowerCase()
    .replace(/^parentbased_/, '');
  if (sampler === 'always_off') return 0;
  if (sampler !== 'traceidratio') return 1;
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
  return Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 1;
}

/** Settings for a server that exports nothing: its trace routes answer OFF and refuse changes. */
export function settingsWithoutTracing(): TraceSettings {
  return new TraceSettings(0, false);
}

/** The exporter and tracer, the SDK loaded only now. */
export async function openTracing(plan: TracingPlan): Promise<RequestTracing> {
  const { RequestTracing } = await import('./request-tracing.js');
  return new RequestTracing(plan.url, plan.ratio);
}
