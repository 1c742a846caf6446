import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packArchive } from '../../src/archive/pack.js';
import { packAffine } from '../fixtures/server.js';

/**
 * Step functions of the test pipeline, as a plain ES module (a step file runs from the
 * extracted archive, so it builds tensors with the context's Tensor class).
 *   split:  doc (BYTES [1], a 0xFE marker byte then text) → rows FP32 [N, W], one row a line;
 *           "fail" answers that request 400, "crash" 500, "throw-all" throws for the batch.
 *   format: y (FP32 [N, W]) and doc → result BYTES [N] (each row as JSON), first INT32 [1].
 */
export const STEPS_SOURCE = `
const textOf = (doc) => {
  const bytes = Buffer.from(doc.data[0], 'latin1');
  return { first: bytes[0] ?? -1, text: bytes.subarray(bytes[0] === 0xfe ? 1 : 0).toString('utf8') };
};

export let initialized = 0;
export function initialize(context) {
  initialized += 1;
  if (typeof context.dir !== 'string' || context.pipeline === undefined) throw new Error('bad context');
}

export function split(requests, context) {
  if (requests.some(({ doc }) => textOf(doc).text === 'throw-all')) throw new Error('the whole batch is bad');
  return requests.map(({ doc }) => {
    const { text } = textOf(doc);
    if (text === 'fail') return Object.assign(new Error('the document says fail'), { status: 400 });
    if (text === 'crash') return new Error('boom');
    const rows = text.split('\\n').filter((line) => line.trim() !== '').map((line) => line.trim().split(/\\s+/).map(Number));
    const width = rows[0]?.length ?? 4;
    return { rows: new context.Tensor('float32', Float32Array.from(rows.flat()), [rows.length, width]) };
  });
}

export function format(requests, context) {
  return requests.map(({ y, doc }) => {
    const [rows, width] = y.dims;
    const lines = [];
    for (let row = 0; row < rows; row++) lines.push(JSON.stringify(Array.from(y.data.subarray(row * width, (row + 1) * width))));
    return {
      result: new context.Tensor('string', lines, [rows]),
      first: new context.Tensor('int32', Int32Array.from([textOf(doc).first]), [1]),
    };
  });
}
`;

/** The test pipeline's config, its model step using `model`; steps listed out of order on purpose. */
export function pipelineConfig(model: string, extra = ''): string {
  return `max_batch_size: 4
dynamic_batching: { max_queue_delay: 0 }
instances: [{ count: 4 }]
inputs: [{ name: doc, datatype: BYTES, shape: [-1] }]
outputs:
  - { name: result, datatype: BYTES, shape: [-1] }
  - { name: first, datatype: INT32, shape: [-1] }
pipeline:
  steps:
    - name: format
      function: steps.mjs#format
      inputs: { y: doubled, doc: doc }
      outputs: { result: result, first: first }
    - name: split
      function: steps.mjs#split
      inputs: { doc: doc }
      outputs: { rows: rows }
    - name: double
      model: ${model}
      input_map: { x: rows }
      output_map: { y: doubled }
      pad: { x: { axis: 1, multiple: 4, max: 8 } }
${extra}`;
}

/** Packs the pipeline `name` over `model` with the test steps; returns the archive path. */
export async function packPipeline(dir: string, name: string, model: string, version = '1'): Promise<string> {
  await mkdir(dir, { recursive: true });
  const steps = join(dir, 'steps.mjs');
  await writeFile(steps, STEPS_SOURCE);
  const configFile = join(dir, `${name}-config.yaml`);
  await writeFile(configFile, pipelineConfig(model));
  const packed = await packArchive({
    modelName: name,
    version,
    configFile,
    extraFiles: [steps],
    exportPath: join(dir, 'store', version),
    force: true,
  });
  return packed.path;
}

/**
 * The step models: `affine` (y = 2x + 1, width variable, batches up to 64 rows) and
 * `batched8`, which only runs full batches of 8 rows (its queue delay is never reached), so a
 * batch of 8 proves rows of different requests were batched together.
 */
export async function packStepModels(dir: string): Promise<{ affine: string; batched8: string }> {
  return {
    affine: await packAffine(dir, { width: 'w', config: 'max_batch_size: 64\n' }),
    batched8: await packAffine(dir, {
      name: 'batched8',
      width: 'w',
      config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 600s\n',
    }),
  };
}

/** The document the split step reads: the marker byte 0xFE (not UTF-8), then the rows as text. */
export function documentBytes(rows: readonly (readonly number[])[]): Buffer {
  return Buffer.concat([Buffer.from([0xfe]), Buffer.from(rows.map((row) => row.join(' ')).join('\n'))]);
}

/** A v2 binary request with `doc` as one BYTES element. */
export function binaryDocRequest(
  doc: Buffer,
  extra: Record<string, unknown> = {},
): { body: Buffer; headers: Record<string, string> } {
  const element = Buffer.alloc(4 + doc.length);
  element.writeUInt32LE(doc.length, 0);
  doc.copy(element, 4);
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'doc', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: element.length } }],
      ...extra,
    }),
  );
  return {
    body: Buffer.concat([header, element]),
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
  };
}

/** The rows the pipeline answers: each input row doubled plus one, padded to a multiple of 4 with 2·0 + 1. */
export function expectedRows(rows: readonly (readonly number[])[]): string[] {
  return rows.map((row) => {
    const width = Math.ceil(row.length / 4) * 4;
    return JSON.stringify(Array.from({ length: width }, (_, index) => 2 * (row[index] ?? 0) + 1));
  });
}
