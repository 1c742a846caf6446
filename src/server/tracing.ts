import type { IncomingHttpHeaders } from 'node:http';
import { defaultTextMapGetter, ROOT_CONTEXT, trace, type Context, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { traceNow } from '../core/trace-channels.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { RequestTrace } from './request-trace.js';
import type { TracingConfig } from './server-config.js';
import { TraceSettings } from './trace-settings.js';

/**
 * OpenTelemetry traces of inference requests, exported over OTLP/HTTP. Off unless an endpoint
 * is set (serve --otlp-endpoint, or the standard OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT): then
 * the inference call asks `begin` for each request, and nothing else is made.
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

export class RequestTracing {
  readonly settings: TraceSettings;
  readonly tracer: Tracer;
  readonly #provider: TracerProvider;
  readonly #propagator = new W3CTraceContextPropagator();

  constructor(plan: TracingPlan) {
    this.settings = new TraceSettings(plan.ratio, true);
    const exporter = new OTLPTraceExporter(plan.url === undefined ? {} : { url: plan.url });
    this.#provider = new TracerProvider({
      // A later resource's attributes win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over batchserve's own.
      resource: defaultResource()
        .merge(resourceFromAttributes({ 'service.name': 'batchserve', 'service.version': BATCHSERVE_VERSION }))
        .merge(detectResources({ detectors: [envDetector] })),
      // Sampling is decided per request by the settings, before any span is made.
      sampler: new AlwaysOnSampler(),
      spanProcessors: [new BatchSpanProcessor({ exporter })],
    });
    this.tracer = this.#provider.getTracer('batchserve', BATCHSERVE_VERSION);
  }

  /** A request at the door: its start, and the caller's trace from `traceparent` (HTTP header or gRPC metadata). */
  begin(headers: IncomingHttpHeaders): RequestTrace {
    return new RequestTrace(this.tracer, this.settings, traceNow(), this.#parent(headers));
  }

  /** Exports what is left; the server's close waits for it. */
  shutdown(): Promise<void> {
    return this.#provider.shutdown();
  }

  #parent(headers: IncomingHttpHeaders): Context | undefined {
    if (headers.traceparent === undefined) return undefined;
    const parent = this.#propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    return trace.getSpanContext(parent) === undefined ? undefined : parent;
  }
}

/** Settings for a server that exports nothing: its trace routes answer OFF and refuse changes. */
export function settingsWithoutTracing(): TraceSettings {
  return new TraceSettings(0, false);
}
