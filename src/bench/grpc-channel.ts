import { Client, credentials, status } from '@grpc/grpc-js';
import { UsageError } from '../core/errors.js';
import type { Protocol } from './report-types.js';

/** The protocols that send over gRPC (`grpc://host:port`); the others are REST. */
export function isGrpcProtocol(protocol: Protocol): boolean {
  return protocol === 'grpc' || protocol === 'grpc-stream';
}

export function isGrpcUrl(url: string): boolean {
  return /^grpc:\/\//i.test(url);
}

/** `grpc://host:port` as grpc-js names a target: `host:port`. */
export function grpcTarget(url: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed?.protocol !== 'grpc:' || parsed.port === '' || !['', '/'].includes(parsed.pathname)) {
    throw new UsageError(`expected a gRPC address grpc://host:port, got ${url}`);
  }
  return parsed.host;
}

/**
 * A grpc-js channel to the server at `url`, for the bench's few questions about the model
 * (the load itself goes over node:http2, see grpc-http2.ts). Answers of any size are taken.
 */
export function grpcClient(url: string): Client {
  return new Client(grpcTarget(url), credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  });
}

/** A gRPC status code as the bench counts failures, by name: "NOT_FOUND", "UNAVAILABLE", … */
export function grpcStatusKind(code: number): string {
  return status[code] ?? 'other';
}
