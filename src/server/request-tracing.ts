import type { IncomingHttpHeaders } from 'node:http';
import { defaultTextMapGetter, ROOT_CONTEXT, trace, type Context, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { traceNow } from '../core/trace-channels.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { RequestTrace } from './request-trace.js';
import { TraceSettings } from './trace-settings.js';

/** OpenTelemetry's tracer and its OTLP/HTTP exporter, and the sampling settings requests are traced by. */
export class RequestTracing {
  readonly settings: TraceSettings;
  readonly tracer: Tracer;
  readonly #provider: TracerProvider;
  readonly #propagator = new W3CTraceContextPropagator();

  /** `url`: the traces URL, else the exporter reads OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT; `ratio`: see TraceSettings. */
  constructor(url: string | undefined, ratio: number) {
    this.settings = new TraceSettings(ratio, true);
    const exporter = new OTLPTraceExporter(url === undefined ? {} : { url });
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
