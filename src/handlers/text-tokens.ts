import ort from 'onnxruntime-node';
import { Tokenizer as HuggingFaceTokenizer } from '@huggingface/tokenizers';
import { HandlerInvalidError, InferenceInputError } from '../core/errors.js';
import type { TextOptions } from '../config/model-config.js';
import type { TensorSpec } from '../core/tensors.js';
import type { TensorMap } from './ort-tensors.js';

/** The inputs a text encoder takes, by the names Hugging Face exports give them. */
const TEXT_INPUTS = ['input_ids', 'attention_mask', 'token_type_ids'] as const;

/** What the handlers use of a tokenizer. */
export interface TextTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  decode(ids: readonly number[], options?: { skip_special_tokens?: boolean }): string;
}

/*
 * The package's type declarations import extensionless paths, which NodeNext cannot resolve:
 * the class is typed here by what is used of it.
 */
const Tokenizer = HuggingFaceTokenizer as unknown as new (json: object, config: object) => TextTokenizer;

/** A tokenizer.json ready to encode, with the id its padding uses. */
export interface LoadedTokenizer {
  readonly tokenizer: TextTokenizer;
  readonly padId: number;
}

export function loadTokenizer(json: string | undefined, handler = 'text-embedding'): LoadedTokenizer {
  if (json === undefined) {
    throw new HandlerInvalidError(
      `the ${handler} handler needs text.tokenizer_file in the model config: a Hugging Face tokenizer.json packed with --extra-files`,
    );
  }
  let parsed: { padding?: { pad_id?: unknown } | null };
  try {
    parsed = JSON.parse(json) as typeof parsed;
  } catch (error) {
    throw new HandlerInvalidError(`text.tokenizer_file is not JSON: ${(error as Error).message}`);
  }
  try {
    const tokenizer = new Tokenizer(parsed, {});
    const padId = typeof parsed.padding?.pad_id === 'number' ? parsed.padding.pad_id : 0;
    return { tokenizer, padId };
  } catch (error) {
    throw new HandlerInvalidError(`text.tokenizer_file is not a tokenizer this handler can run: ${String(error)}`);
  }
}

/** Checks the model takes input_ids (and at most the mask and token types), as INT64 or INT32. */
export function checkTextInputs(inputs: readonly TensorSpec[], handler = 'text-embedding'): void {
  const known: readonly string[] = TEXT_INPUTS;
  const problems = inputs.flatMap((input) => {
    if (!known.includes(input.name)) return [`input "${input.name}" is not one of ${TEXT_INPUTS.join(', ')}`];
    if (input.datatype !== 'INT64' && input.datatype !== 'INT32') {
      return [`input "${input.name}" is ${input.datatype}, expected INT64 or INT32`];
    }
    if (input.shape.length !== 2)
      return [`input "${input.name}" has rank ${input.shape.length}, expected [batch, tokens]`];
    return [];
  });
  if (!inputs.some((input) => input.name === 'input_ids')) problems.push('the model has no input "input_ids"');
  if (problems.length > 0) throw new HandlerInvalidError(`the ${handler} handler: ${problems.join('; ')}`);
}

/** Token ids of each text, refused (not cut) when longer than max_length. */
export function encodeTexts(texts: readonly string[], { tokenizer }: LoadedTokenizer, maxLength: number): number[][] {
  return texts.map((text, index) => {
    const { ids } = tokenizer.encode(text);
    if (ids.length > maxLength) {
      throw new InferenceInputError(
        `text ${index} is ${ids.length} tokens long, over this model's max_length of ${maxLength}`,
      );
    }
    return ids;
  });
}

/**
 * One batch of token ids as the model's inputs: every row padded to the longest, rounded up
 * to a multiple of pad_multiple (no further than max_length), with its attention mask.
 */
export function paddedBatch(
  rows: readonly (readonly number[])[],
  padId: number,
  options: TextOptions,
  inputs: readonly TensorSpec[],
): TensorMap {
  const longest = rows.reduce((most, ids) => Math.max(most, ids.length), 1);
  const width = Math.min(Math.ceil(longest / options.pad_multiple) * options.pad_multiple, options.max_length);
  const ids = new BigInt64Array(rows.length * width).fill(BigInt(padId));
  const mask = new BigInt64Array(rows.length * width);
  rows.forEach((row, index) => {
    const offset = index * width;
    for (let position = 0; position < row.length; position++) {
      ids[offset + position] = BigInt(row[position] as number);
      mask[offset + position] = 1n;
    }
  });
  const dims = [rows.length, width];
  const feeds: TensorMap = {};
  for (const input of inputs) {
    // token_type_ids: one segment, all zeros (checkTextInputs allows no other names).
    const data =
      input.name === 'input_ids' ? ids : input.name === 'attention_mask' ? mask : new BigInt64Array(ids.length);
    feeds[input.name] =
      input.datatype === 'INT32'
        ? new ort.Tensor('int32', Int32Array.from(data, Number), dims)
        : new ort.Tensor('int64', data, dims);
  }
  return feeds;
}
