import { InferenceInputError } from '../core/errors.js';
import { parameterValues, type ModelInferRequestMessage } from '../protocol/grpc-tensors.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { GenerationResult } from '../runtime/generator.js';
import type { Codec, GenerationWork } from './inference-call.js';
import { generationRequest, type GenerationCall } from './openai-generation.js';
import { generateParameters } from './triton-generate.js';

/** A ModelStreamInferResponse's infer_response. */
type StreamResponse = Record<string, unknown>;

/**
 * Streamed generation over gRPC's ModelStreamInfer, as Triton's decoupled models answer it (the
 * vLLM and TensorRT-LLM backends): the request carries the prompt as a `text_input` BYTES
 * tensor and the sampling parameters as request parameters (max_tokens, temperature, …, the
 * names generate takes); each piece of new text is a response with a `text_output` BYTES
 * tensor, and the last is an empty response whose `triton_final_response` parameter is true.
 * A codec over the one inference call.
 */
export function grpcGenerateCodec(
  message: ModelInferRequestMessage,
  write: (response: StreamResponse) => void,
): Omit<Codec<GenerationWork>, 'read'> {
  let call: GenerationCall | undefined;
  const response = (model: LoadedModel, text: string | undefined): StreamResponse => ({
    model_name: model.name,
    model_version: model.version,
    id: message.id ?? '',
    outputs: text === undefined ? [] : [{ name: 'text_output', datatype: 'BYTES', shape: [1] }],
    raw_output_contents: text === undefined ? [] : [bytesElement(text)],
    parameters: { triton_final_response: { bool_param: text === undefined } },
  });
  return {
    generates: true,
    decode(model) {
      call = generateParameters(promptOf(message), parameterValues(message.parameters), model.name, true);
      const request = generationRequest(model, call);
      const echo = call.echo ? call.prompt : '';
      let first = true;
      return {
        kind: 'generation',
        id: undefined,
        request: {
          ...request,
          onText: (text) => {
            write(response(model, first ? echo + text : text));
            first = false;
          },
        },
        forShadow: (shadow) => generationRequest(shadow, call as GenerationCall),
      };
    },
    answer(model, _work, [answered]) {
      // Only the final flag is left to send (an answer of no text sends the echo, if any, first).
      if (call?.echo && (answered?.response as GenerationResult).text === '') write(response(model, call.prompt));
      write(response(model, undefined));
    },
  };
}

/** text_input: one BYTES element, in the tensor's contents or its raw_input_contents (length-prefixed). */
function promptOf(message: ModelInferRequestMessage): string {
  const inputs = message.inputs ?? [];
  const index = inputs.findIndex((input) => input.name === 'text_input');
  const others = inputs.filter((input) => input.name !== 'text_input').map((input) => input.name);
  if (others.length > 0) {
    throw new InferenceInputError(
      `generation takes one input, text_input, and its parameters as request parameters; not ${others.join(', ')}`,
    );
  }
  const input = inputs[index];
  if (!input || input.datatype !== 'BYTES') throw new InferenceInputError('generation needs a text_input BYTES tensor');
  const contents = input.contents?.bytes_contents;
  if (contents && contents.length > 0) {
    if (contents.length !== 1) throw new InferenceInputError('text_input must hold one prompt');
    return (contents[0] as Buffer).toString('utf8');
  }
  const raw = message.raw_input_contents?.[index];
  if (!raw || raw.length < 4) throw new InferenceInputError('text_input has no data');
  const length = raw.readUInt32LE(0);
  if (length + 4 !== raw.length) throw new InferenceInputError('text_input must hold one prompt');
  return raw.subarray(4).toString('utf8');
}

/** One BYTES element as Triton sends it raw: its length (uint32, little-endian), then its bytes. */
function bytesElement(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const element = Buffer.allocUnsafe(4 + bytes.length);
  element.writeUInt32LE(bytes.length, 0);
  bytes.copy(element, 4);
  return element;
}
