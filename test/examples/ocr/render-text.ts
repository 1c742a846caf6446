import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import opentype from 'opentype.js';
import { PNG } from 'pngjs';

/**
 * Draws text into a PNG for the OCR tests, with no native canvas: opentype.js turns the
 * string into glyph outlines from a bundled font (Source Sans Pro, OFL), and the outlines
 * are filled here with 4 × 4 supersampling, black on white.
 */
const FONT = opentype.parse(
  readFileSync(
    fileURLToPath(import.meta.resolve('@fontsource/source-sans-pro/files/source-sans-pro-latin-400-normal.woff')),
  ).buffer,
);

export interface TextToDraw {
  readonly text: string;
  /** Left end of the baseline, in pixels. */
  readonly x: number;
  readonly baseline: number;
  /** Font size in pixels. */
  readonly size: number;
  /** Turned half a turn about the centre of its own outline. */
  readonly upsideDown?: boolean;
}

type Edge = readonly [x0: number, y0: number, x1: number, y1: number];

const SAMPLES = 4;
/** Curves are drawn as 12 straight pieces: finer than a pixel at the sizes the tests use. */
const CURVE_STEPS = Array.from({ length: 12 }, (_, i) => (i + 1) / 12);

const quadratic = (p0: number, p1: number, p2: number, t: number): number =>
  (1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t ** 2 * p2;
const cubic = (p0: number, p1: number, p2: number, p3: number, t: number): number =>
  (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3;

export function renderTextPng(width: number, height: number, texts: readonly TextToDraw[]): Buffer {
  const coverage = new Float32Array(width * height);
  for (const text of texts) fill(outlineEdges(text), coverage, width, height);
  const png = new PNG({ width, height });
  coverage.forEach((amount, i) => {
    const value = Math.round(255 * (1 - Math.min(1, amount)));
    png.data.set([value, value, value, 255], i * 4);
  });
  return PNG.sync.write(png);
}

function outlineEdges({ text, x, baseline, size, upsideDown }: TextToDraw): Edge[] {
  const path = FONT.getPath(text, x, baseline, size);
  const bounds = path.getBoundingBox();
  const turn = (px: number, py: number): [number, number] =>
    upsideDown ? [bounds.x1 + bounds.x2 - px, bounds.y1 + bounds.y2 - py] : [px, py];
  const edges: Edge[] = [];
  let start: [number, number] = [0, 0];
  let pen: [number, number] = [0, 0];
  const lineTo = (to: [number, number]): void => {
    edges.push([...turn(...pen), ...turn(...to)]);
    pen = to;
  };
  for (const command of path.commands) {
    if (command.type === 'M') {
      start = [command.x, command.y];
      pen = start;
    } else if (command.type === 'L') {
      lineTo([command.x, command.y]);
    } else if (command.type === 'Q') {
      const [x0, y0] = pen;
      for (const t of CURVE_STEPS) {
        lineTo([quadratic(x0, command.x1, command.x, t), quadratic(y0, command.y1, command.y, t)]);
      }
    } else if (command.type === 'C') {
      const [x0, y0] = pen;
      for (const t of CURVE_STEPS) {
        lineTo([cubic(x0, command.x1, command.x2, command.x, t), cubic(y0, command.y1, command.y2, command.y, t)]);
      }
    } else if (pen[0] !== start[0] || pen[1] !== start[1]) {
      lineTo(start);
    }
  }
  return edges;
}

/** Non-zero winding fill: each of the pixel's 16 samples inside the outline adds 1/16. */
function fill(edges: readonly Edge[], coverage: Float32Array, width: number, height: number): void {
  for (let row = 0; row < height * SAMPLES; row++) {
    const y = (row + 0.5) / SAMPLES;
    const crossings: [x: number, winding: number][] = [];
    for (const [x0, y0, x1, y1] of edges) {
      if (y0 <= y === y1 <= y) continue;
      crossings.push([x0 + ((y - y0) / (y1 - y0)) * (x1 - x0), y1 > y0 ? 1 : -1]);
    }
    crossings.sort((a, b) => a[0] - b[0]);
    let winding = 0;
    for (let i = 0; i < crossings.length - 1; i++) {
      winding += crossings[i]![1];
      if (winding === 0) continue;
      const first = Math.max(0, Math.ceil(crossings[i]![0] * SAMPLES - 0.5));
      const last = Math.min(width * SAMPLES - 1, Math.ceil(crossings[i + 1]![0] * SAMPLES - 0.5) - 1);
      const pixelRow = Math.floor(row / SAMPLES) * width;
      for (let sample = first; sample <= last; sample++) {
        coverage[pixelRow + Math.floor(sample / SAMPLES)]! += 1 / (SAMPLES * SAMPLES);
      }
    }
  }
}
