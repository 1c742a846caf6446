import { Client, credentials, status, type ChannelCredentials } from '@grpc/grpc-js';
import type { ClientTls } from '../core/client-tls.js';
import { UsageError } from '../core/errors.js';
import type { Protocol } from './report-types.js';

/** The protocols that send over gRPC (`grpc://host:port`); the others are REST. */
export function isGrpcProtocol(protocol: Protocol): boolean {
  return protocol === 'grpc' || protocol === 'grpc-stream';
}

/** `grpc://host:port`, or `grpcs://host:port` (gRPC over TLS). */
export function isGrpcUrl(url: string): boolean {
  return /^grpcs?:\/\//i.test(url);
}

/** `grpcs://`: the server speaks TLS. */
export function isSecureGrpcUrl(url: string): boolean {
  return /^grpcs:\/\//i.test(url);
}

/** `grpc://host:port` (or `grpcs://`) as grpc-js names a target: `host:port`. */
export function grpcTarget(url: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (
    (parsed?.protocol !== 'grpc:' && parsed?.protocol !== 'grpcs:') ||
    parsed.port === '' ||
    !['', '/'].includes(parsed.pathname)
  ) {
    throw new UsageError(`expected a gRPC address grpc://host:port (grpcs:// with TLS), got ${url}`);
  }
  return parsed.host;
}

/**
 * A grpc-js channel to the server at `url`, for the bench's few questions about the model
 * (the load itself goes over node:http2, see grpc-http2.ts). Answers of any size are taken.
 * A grpcs:// URL is TLS, trusting `tls.ca` (else the system's CAs) and presenting its certificate.
 */
export function grpcClient(url: string, tls?: ClientTls): Client {
  return new Client(grpcTarget(url), channelCredentials(url, tls), {
    'grpc.max_receive_message_length': -1,
  });
}

function channelCredentials(url: string, tls: ClientTls | undefined): ChannelCredentials {
  if (!isSecureGrpcUrl(url)) return credentials.createInsecure();
  const pem = (text: string | undefined): Buffer | null => (text === undefined ? null : Buffer.from(text));
  return credentials.createSsl(pem(tls?.ca), pem(tls?.key), pem(tls?.cert));
}

/** A gRPC status code as the bench counts failures, by name: "NOT_FOUND", "UNAVAILABLE", … */
export function grpcStatusKind(code: number): string {
  return status[code] ?? 'other';
}
