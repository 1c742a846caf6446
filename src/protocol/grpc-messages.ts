import type { ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { InferenceInputError, InputFileError } from '../core/errors.js';

/** The vendored Triton protos (protos/SOURCE.md), beside dist/ and src/ in the package. */
export const TRITON_PROTO_DIR = fileURLToPath(new URL('../../../protos/triton/', import.meta.url));
export const INFERENCE_SERVICE = 'inference.GRPCInferenceService';

/**
 * The messages of `GRPCInferenceService`, decoded and encoded by protobufjs's generated
 * (at load) codecs. proto-loader's own deserializer converts every message to a plain object
 * afterwards; decoding with the types directly halves the cost of a 110 KB raw request
 * (benchmarks/grpc-decode.js) and leaves `bytes` fields as views of the received buffer.
 * Messages are protobufjs instances with snake_case fields; 64-bit integers arrive as numbers
 * or Long objects (`toSafeNumber` reads either).
 */
export interface InferenceProtocol {
  /** For `Server.addService`: every RPC with the fast codecs. */
  readonly service: ServiceDefinition;
  /** proto-loader's definition of the same files, for server reflection. */
  readonly packageDefinition: PackageDefinition;
  readonly types: protobuf.Root;
}

let loaded: InferenceProtocol | undefined;

/** Loads the protos once per process. */
export function inferenceProtocol(): InferenceProtocol {
  if (loaded) return loaded;
  if (!existsSync(`${TRITON_PROTO_DIR}grpc_service.proto`)) {
    throw new InputFileError(
      `batchserve's gRPC protocol files are missing from ${TRITON_PROTO_DIR} (the package ships them in protos/); reinstall batchserve`,
    );
  }
  const packageDefinition = loadSync('grpc_service.proto', {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [TRITON_PROTO_DIR],
  });
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => `${TRITON_PROTO_DIR}${target.replace(/^.*[\\/]/, '')}`;
  root.loadSync('grpc_service.proto', { keepCase: true });
  root.resolveAll();
  const methods = packageDefinition[INFERENCE_SERVICE] as unknown as Record<string, ServiceDefinition[string]>;
  const rpcs = root.lookupService(INFERENCE_SERVICE).methods;
  const service: Record<string, ServiceDefinition[string]> = {};
  for (const [name, method] of Object.entries(methods)) {
    const rpc = rpcs[name] as protobuf.Method;
    const requestType = rpc.resolvedRequestType as protobuf.Type;
    const responseType = rpc.resolvedResponseType as protobuf.Type;
    service[name] = {
      ...method,
      requestSerialize: (message: object) => Buffer.from(requestType.encode(message).finish()),
      requestDeserialize: (bytes: Buffer) => requestType.decode(bytes),
      responseSerialize: (message: object) => Buffer.from(responseType.encode(message).finish()),
      responseDeserialize: (bytes: Buffer) => responseType.decode(bytes),
    };
  }
  loaded = { service: service as ServiceDefinition, packageDefinition, types: root };
  return loaded;
}

/** A uint64/int64 field as a number: protobufjs gives a number or a Long. */
export function toSafeNumber(value: number | { toNumber(): number } | undefined | null): number {
  if (value === undefined || value === null) return 0;
  return typeof value === 'number' ? value : value.toNumber();
}

/**
 * The model and id a serialized ModelInferRequest names (fields 1 to 3), read without decoding
 * the rest, so a request can be admitted (or refused) before its tensors are decoded.
 */
export function peekModelTarget(message: Uint8Array): { name: string; version: string; id: string } {
  const reader = protobuf.Reader.create(message);
  let name = '';
  let version = '';
  let id = '';
  try {
    while (reader.pos < reader.len) {
      const tag = reader.uint32();
      const field = tag >>> 3;
      if (field === 1) name = reader.string();
      else if (field === 2) version = reader.string();
      else if (field === 3) id = reader.string();
      else reader.skipType(tag & 7);
    }
  } catch (error) {
    throw new InferenceInputError(`the ModelInferRequest is not a valid protobuf message: ${(error as Error).message}`);
  }
  return { name, version, id };
}
