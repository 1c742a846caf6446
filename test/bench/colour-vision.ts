/**
 * How far apart two colours look, to a reader with normal vision and to one with each of the
 * two common colour blindnesses: the CIE76 difference ΔE*ab in CIELAB, after simulating the
 * blindness with Machado, Oliveira and Fernandes's (2009) full-severity matrices on linear RGB.
 * ΔE ≈ 2.3 is just noticeable; series need far more than that to be told apart at a glance.
 */

type Rgb = readonly [number, number, number];
type Matrix = readonly [Rgb, Rgb, Rgb];

const VISIONS: Readonly<Record<string, Matrix>> = {
  normal: [
    [1, 0, 0],
    [0, 1, 0],
    [0, 0, 1],
  ],
  deuteranopia: [
    [0.367322, 0.860646, -0.227968],
    [0.280085, 0.672501, 0.047413],
    [-0.01182, 0.04294, 0.968881],
  ],
  protanopia: [
    [0.152286, 1.052583, -0.204868],
    [0.114503, 0.786281, 0.099216],
    [-0.003882, -0.048116, 1.051998],
  ],
};

/** The smallest ΔE between `a` and `b` over the visions, with the vision it was seen in. */
export function leastDifference(a: string, b: string): { deltaE: number; vision: string } {
  const seen = Object.entries(VISIONS).map(([vision, matrix]) => ({
    vision,
    deltaE: distance(lab(apply(matrix, linear(a))), lab(apply(matrix, linear(b)))),
  }));
  return seen.reduce((least, next) => (next.deltaE < least.deltaE ? next : least));
}

/** '#rrggbb' to linear-light sRGB, 0–1. */
function linear(hex: string): Rgb {
  const match = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!match) throw new Error(`not a #rrggbb colour: ${hex}`);
  const [r, g, b] = match.slice(1).map((pair) => {
    const v = parseInt(pair, 16) / 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return [r, g, b];
}

function apply(matrix: Matrix, [r, g, b]: Rgb): Rgb {
  const clamp = (v: number): number => Math.min(1, Math.max(0, v));
  const [x, y, z] = matrix.map(([m0, m1, m2]) => clamp(m0 * r + m1 * g + m2 * b)) as [number, number, number];
  return [x, y, z];
}

/** Linear sRGB to CIELAB under D65. */
function lab([r, g, b]: Rgb): Rgb {
  const f = (t: number): number => (t > 216 / 24389 ? Math.cbrt(t) : ((24389 / 27) * t + 16) / 116);
  const x = f((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047);
  const y = f(0.2126 * r + 0.7152 * g + 0.0722 * b);
  const z = f((0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883);
  return [116 * y - 16, 500 * (x - y), 200 * (y - z)];
}

function distance(p: Rgb, q: Rgb): number {
  return Math.hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]);
}
