import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname } from 'node:path';
import ort from 'onnxruntime-node';
import {
  cropLines,
  decodeLines,
  imageBytesOf,
  initialize,
  orientLines,
  prepareDetector,
  type OcrStepContext,
  type StepResult,
} from '../../../examples/ocr/pipeline/steps.js';
import {
  loadOcrSessions,
  OCR_MODEL_FILES,
  releaseOcrSessions,
  type OcrSessions,
} from '../../../examples/ocr/src/models.js';
import { readText } from '../../../examples/ocr/src/read-text.js';
import { renderTextPng, type TextToDraw } from './render-text.js';

/**
 * The pipeline's function steps called in order on several images at once, with the models
 * between them run as the server would: every request's rows in one batch, widths padded with
 * zeros to the widest, the answer split back by rows.
 */
const FOUR_LINES: readonly TextToDraw[] = [
  { text: 'Batchserve', x: 24, baseline: 48, size: 32 },
  { text: 'HELLO2024', x: 24, baseline: 108, size: 32 },
  { text: 'Invoice4096', x: 40, baseline: 168, size: 32, upsideDown: true },
  { text: 'pipelines8', x: 24, baseline: 228, size: 32 },
];
const TWO_LINES: readonly TextToDraw[] = [
  { text: 'Recogniser', x: 20, baseline: 50, size: 30 },
  { text: 'QUEUE77', x: 30, baseline: 110, size: 30 },
];

const IMAGES = [renderTextPng(360, 250, FOUR_LINES), renderTextPng(300, 140, TWO_LINES), renderTextPng(200, 100, [])];
const DRAWN = [FOUR_LINES, TWO_LINES, []];

let sessions: OcrSessions;
const context: OcrStepContext = { dir: dirname(OCR_MODEL_FILES.characters), Tensor: ort.Tensor };
before(async () => {
  sessions = await loadOcrSessions();
  await initialize(context);
});
after(async () => {
  await releaseOcrSessions(sessions);
});

type TensorMap = Record<string, ort.Tensor>;

function succeeded(results: readonly StepResult[]): TensorMap[] {
  return results.map((result) => {
    if (result instanceof Error) throw result;
    return result;
  });
}

const rowsOf = (maps: readonly TensorMap[], name: string): number[] => maps.map((map) => map[name]!.dims[0]!);

/** The requests' FP32 inputs padded with zeros along the last axis to the widest, then stacked. */
function stackPadded(inputs: readonly ort.Tensor[]): ort.Tensor {
  const width = Math.max(...inputs.map((input) => input.dims.at(-1)!));
  const [, ...inner] = inputs[0]!.dims;
  const rowShape = [...inner.slice(0, -1), width];
  const rows = inputs.reduce((sum, input) => sum + input.dims[0]!, 0);
  const rowSize = rowShape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(rows * rowSize);
  let at = 0;
  for (const input of inputs) {
    const from = input.data as Float32Array;
    const inputWidth = input.dims.at(-1)!;
    for (let line = 0; line < from.length / inputWidth; line++) {
      data.set(from.subarray(line * inputWidth, (line + 1) * inputWidth), at + line * width);
    }
    at += (from.length / inputWidth) * width;
  }
  return new ort.Tensor('float32', data, [rows, ...rowShape]);
}

/** Runs a model on all requests' rows in one batch, as the model's batcher would; requests with no rows skip it. */
async function runTogether(
  session: ort.InferenceSession,
  inputs: readonly ort.Tensor[],
): Promise<(ort.Tensor | undefined)[]> {
  const present = inputs.filter((input) => input.dims[0]! > 0);
  if (present.length === 0) return inputs.map(() => undefined);
  const outputs = await session.run({ [session.inputNames[0]!]: stackPadded(present) });
  const output = outputs[session.outputNames[0]!]!;
  const [, ...inner] = output.dims;
  const rowSize = inner.reduce((a, b) => a * b, 1);
  let row = 0;
  return inputs.map((input) => {
    const rows = input.dims[0]!;
    if (rows === 0) return undefined;
    const data = (output.data as Float32Array).slice(row * rowSize, (row + rows) * rowSize);
    row += rows;
    return new ort.Tensor('float32', data, [rows, ...inner]);
  });
}

const withAnswer = (maps: readonly TensorMap[], answers: readonly (ort.Tensor | undefined)[]): TensorMap[] =>
  maps.map((map, i) => (answers[i] ? { ...map, probabilities: answers[i] } : map));

interface Traced {
  readonly rows: Record<string, number[]>;
  readonly lines: { text: string; confidence: number; box: number[][]; orientation: number }[][];
}

/** The four steps and three models in order, on the images as one batch of pipeline requests. */
async function readThroughSteps(images: readonly Buffer[], padDetectorTo = 0): Promise<Traced> {
  const requests = images.map((image) => ({ image: new ort.Tensor('string', [image.toString('latin1')], [1]) }));
  const prepared = succeeded(prepareDetector(requests, context));
  const detectorInputs = prepared.map((map) => (padDetectorTo ? padLastAxis(map.x!, padDetectorTo) : map.x!));
  // The images differ in size, so each is a detector batch of its own.
  const maps = await Promise.all(detectorInputs.map((x) => runTogether(sessions.detector, [x])));
  const cropped = succeeded(
    cropLines(
      prepared.map((map, i) => ({ pixels: map.pixels!, probability: maps[i]![0]! })),
      context,
    ),
  );
  const classified = await runTogether(
    sessions.classifier,
    cropped.map((map) => map.x!),
  );
  const oriented = succeeded(
    orientLines(
      withAnswer(
        cropped.map((map) => ({ crops: map.crops!, sizes: map.sizes! })),
        classified,
      ),
      context,
    ),
  );
  const recognised = await runTogether(
    sessions.recognizer,
    oriented.map((map) => map.x!),
  );
  const decoded = succeeded(
    decodeLines(
      withAnswer(
        oriented.map((map, i) => ({ boxes: cropped[i]!.boxes!, angles: map.angles! })),
        recognised,
      ),
      context,
    ),
  );
  return {
    rows: {
      detector: rowsOf(prepared, 'x'),
      pixels: rowsOf(prepared, 'pixels'),
      classifier: rowsOf(cropped, 'x'),
      boxes: rowsOf(cropped, 'boxes'),
      crops: rowsOf(cropped, 'crops'),
      recogniser: rowsOf(oriented, 'x'),
      angles: rowsOf(oriented, 'angles'),
      lines: rowsOf(decoded, 'lines'),
    },
    lines: decoded.map((map) => (map.lines!.data as string[]).map((line) => JSON.parse(line))),
  };
}

/** The detector input padded with zeros on the right to `width`, as a pipeline `pad:` would. */
function padLastAxis(x: ort.Tensor, width: number): ort.Tensor {
  const [, channels = 0, height = 0, from = 0] = x.dims;
  const data = new Float32Array(channels * height * width);
  for (let row = 0; row < channels * height; row++) {
    data.set((x.data as Float32Array).subarray(row * from, (row + 1) * from), row * width);
  }
  return new ort.Tensor('float32', data, [1, channels, height, width]);
}

test('the steps read what readText reads, upside-down line included, with each image fanning out to its own lines', async () => {
  const traced = await readThroughSteps(IMAGES);
  const lineCounts = DRAWN.map((drawn) => drawn.length);
  assert.deepEqual(traced.rows, {
    detector: [1, 1, 1],
    pixels: [1, 1, 1],
    classifier: lineCounts,
    boxes: lineCounts,
    crops: lineCounts,
    recogniser: lineCounts,
    angles: lineCounts,
    lines: lineCounts,
  });
  for (const [i, image] of IMAGES.entries()) {
    const inProcess = await readText(image, sessions);
    assert.deepEqual(
      traced.lines[i]!.map((line) => [line.text, line.orientation]),
      DRAWN[i]!.map((drawn) => [drawn.text, drawn.upsideDown ? 180 : 0]),
    );
    // Batched with other images' lines, a model's sums may differ in the last bits.
    const withoutConfidence = (line: { text: string; box: readonly (readonly number[])[]; orientation: number }) => ({
      text: line.text,
      box: line.box.map((point) => [...point]),
      orientation: line.orientation,
    });
    assert.deepEqual(traced.lines[i]!.map(withoutConfidence), inProcess.map(withoutConfidence));
    traced.lines[i]!.forEach((line, n) => {
      const difference = Math.abs(line.confidence - inProcess[n]!.confidence);
      assert.ok(difference < 1e-4, `${line.text}: confidence differs by ${difference}`);
    });
  }
});

test('a detector input padded to a shared width reads the same lines', async () => {
  const traced = await readThroughSteps([IMAGES[0]!], 512);
  assert.deepEqual(
    traced.lines[0]!.map((line) => line.text),
    FOUR_LINES.map((drawn) => drawn.text),
  );
});

test('an undecodable image fails only its own request, with an input error', () => {
  const results = prepareDetector(
    [
      { image: new ort.Tensor('string', [Buffer.from('not an image').toString('latin1')], [1]) },
      { image: new ort.Tensor('string', [IMAGES[2]!.toString('latin1')], [1]) },
    ],
    context,
  );
  assert.ok(results[0] instanceof Error);
  assert.equal((results[0] as Error & { code?: string }).code, 'BS_ERR_INFERENCE_INPUT');
  assert.equal((results[0] as Error & { status?: number }).status, 400, 'what the server reads as bad input');
  assert.ok(!(results[1] instanceof Error));
  assert.deepEqual(results[1]!.x!.dims, [1, 3, 96, 192]);
});

test('image bytes are taken from raw bytes and from binary strings alike', () => {
  const bytes = Buffer.from([0x89, 0x50, 0xff, 0x00, 0x80]);
  const asBytes = new ort.Tensor('string', [bytes] as unknown as string[], [1]);
  assert.deepEqual(imageBytesOf(asBytes), bytes);
  assert.deepEqual(imageBytesOf(new ort.Tensor('string', [bytes.toString('latin1')], [1])), bytes);
  assert.throws(() => imageBytesOf(new ort.Tensor('string', ['a', 'b'], [2])), { code: 'BS_ERR_INFERENCE_INPUT' });
});
