import type { EventEmitter } from 'node:events';
import type { ServerHttp2Session } from 'node:http2';
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation, protoPath as healthProtoPath } from 'grpc-health-check';
import { INFERENCE_SERVICE, inferenceProtocol } from '../protocol/grpc-messages.js';
import type { GrpcInferenceApi } from './grpc-api.js';
import { bindError, type ApiPort } from './ports.js';
import type { ServerConfig } from './server-config.js';
import type { ServerTls } from './tls.js';

/** The running gRPC port: its address, and how it stops. */
export interface GrpcEndpoint {
  /** `grpc://host:port`, or `grpcs://host:port` with TLS. */
  readonly url: string;
  /** Refuses new calls and streams, ends open streams once their answers are written; resolves when every call is done. */
  drain(): Promise<void>;
  /** Cuts every call at once. */
  close(): void;
}

/**
 * Starts the gRPC server: Triton's inference service, the standard `grpc.health.v1.Health`
 * (Kubernetes gRPC probes: NOT_SERVING once a drain starts) and server reflection (grpcurl
 * needs no proto files). Messages up to `max_request_size` are taken, as on REST. With `tls`,
 * only TLS connections are taken, and the certificates follow its reloads.
 */
export async function startGrpcServer(
  config: ServerConfig,
  api: GrpcInferenceApi,
  port: ApiPort,
  tls?: ServerTls,
): Promise<GrpcEndpoint> {
  const server = new Server({
    'grpc.max_receive_message_length': config.max_request_size,
    'grpc.max_send_message_length': -1,
    'grpc.keepalive_time_ms': Math.round(config.grpc_keepalive_time / 1000),
    'grpc.keepalive_timeout_ms': Math.round(config.grpc_keepalive_timeout / 1000),
  });
  widenFlowControl(server, config.grpc_max_metadata_size);
  const { service, packageDefinition } = inferenceProtocol();
  server.addService(undecodedInfer(service), api.handlers());
  const health = new HealthImplementation({ '': 'SERVING', [INFERENCE_SERVICE]: 'SERVING' });
  health.addToServer(server);
  const healthDefinition = loadSync(healthProtoPath, { keepCase: true });
  new ReflectionService({ ...packageDefinition, ...healthDefinition }).addToServer(server);

  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const bound = await new Promise<number>((ready, fail) => {
    const credentials = tls ? tls.grpcCredentials() : ServerCredentials.createInsecure();
    server.bindAsync(`${host}:${port.port}`, credentials, (error, chosen) => {
      if (error) {
        const code = /EADDRINUSE|address already in use/i.test(error.message) ? 'EADDRINUSE' : undefined;
        fail(bindError(Object.assign(error, code ? { code } : {}), port, config.host));
      } else ready(chosen);
    });
  });
  widenSessionWindows(server);
  return {
    url: `${tls ? 'grpcs' : 'grpc'}://${host}:${bound}`,
    drain: () => {
      health.setStatus('', 'NOT_SERVING');
      health.setStatus(INFERENCE_SERVICE, 'NOT_SERVING');
      api.drain();
      return new Promise<void>((done) => server.tryShutdown(() => done()));
    },
    close: () => server.forceShutdown(),
  };
}

/**
 * HTTP/2 flow control: grpc-js keeps Node's 64 KiB windows and has no server option to raise
 * them, so a 110 KB request stalls mid-body waiting for a window update, which shows in the
 * p50 at concurrency 1 (benchmarks/grpc-vs-rest.js). Raised through grpc-js's http2 server
 * settings and each session; both are private to grpc-js, so a version that renames them is
 * left as it is rather than broken.
 */
const FLOW_CONTROL_WINDOW = 16 * 1024 * 1024;

/**
 * Also lets header lists past grpc_max_metadata_size through HTTP/2, so an oversized call is
 * answered RESOURCE_EXHAUSTED with the limit instead of having its stream reset, which clients
 * report as INTERNAL. (nghttp2 still refuses blocks past about 64 KiB by itself.)
 */
function widenFlowControl(server: Server, maxMetadataBytes: number): void {
  const internals = server as unknown as { commonServerOptions?: { settings?: Record<string, unknown> } };
  const options = internals.commonServerOptions;
  if (options) {
    options.settings = {
      ...options.settings,
      initialWindowSize: FLOW_CONTROL_WINDOW,
      maxHeaderListSize: maxMetadataBytes + HEADER_LIST_HEADROOM,
    };
  }
}

/** Room over the limit, so a header list just past it arrives to be refused by name. */
const HEADER_LIST_HEADROOM = 64 * 1024;

function widenSessionWindows(server: Server): void {
  const internals = server as unknown as { http2Servers?: Map<EventEmitter, unknown> };
  for (const http2Server of internals.http2Servers?.keys() ?? []) {
    http2Server.on('session', (session: ServerHttp2Session) => session.setLocalWindowSize(FLOW_CONTROL_WINDOW));
  }
}

/**
 * ModelInfer and ModelStreamInfer take their messages as received bytes: the API reads the
 * model from them, admits the request, and only then decodes the tensors.
 */
function undecodedInfer(service: ServiceDefinition): ServiceDefinition {
  const asReceived = (bytes: Buffer): Buffer => bytes;
  return {
    ...service,
    ModelInfer: { ...service.ModelInfer, requestDeserialize: asReceived },
    ModelStreamInfer: { ...service.ModelStreamInfer, requestDeserialize: asReceived },
  } as ServiceDefinition;
}
