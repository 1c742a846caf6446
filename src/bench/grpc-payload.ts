import { inferenceProtocol } from '../protocol/grpc-messages.js';

/** One input of a gRPC request, its data already in Triton's binary layout. */
export interface RawInput {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly data: Buffer;
}

/**
 * A ModelInferRequest with every input's data in `raw_input_contents` (the form Triton's own
 * clients send, and the one the server decodes without converting), serialized once for every
 * request of a run, and the method it goes to: ModelInfer, or ModelStreamInfer.
 */
export function grpcInferRequest(
  model: string,
  inputs: readonly RawInput[],
  stream: boolean,
): { path: string; body: Buffer } {
  const { service, types } = inferenceProtocol();
  const type = types.lookupType('inference.ModelInferRequest');
  const message = type.fromObject({
    model_name: model,
    inputs: inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    raw_input_contents: inputs.map((input) => input.data),
  });
  const method = stream ? service.ModelStreamInfer : service.ModelInfer;
  return { path: (method as { path: string }).path, body: Buffer.from(type.encode(message).finish()) };
}
