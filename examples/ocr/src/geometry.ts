/** A point in pixel coordinates: x to the right, y down. */
export type Point = readonly [x: number, y: number];

/** Four corners in reading order: top-left, top-right, bottom-right, bottom-left. */
export type Quad = readonly [Point, Point, Point, Point];

/** A rectangle at any angle: `axis` is the unit vector along its width. */
export interface Rectangle {
  readonly center: Point;
  readonly axis: Point;
  readonly width: number;
  readonly height: number;
}

const cross = (o: Point, a: Point, b: Point): number => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);

/** The convex hull (Andrew's monotone chain): its corners in order around it, without repeats. */
export function convexHull(points: readonly Point[]): Point[] {
  const sorted = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const unique = sorted.filter((p, i) => i === 0 || p[0] !== sorted[i - 1]![0] || p[1] !== sorted[i - 1]![1]);
  if (unique.length < 3) return unique;
  const half = (ordered: readonly Point[]): Point[] => {
    const chain: Point[] = [];
    for (const p of ordered) {
      while (chain.length >= 2 && cross(chain[chain.length - 2]!, chain[chain.length - 1]!, p) <= 0) chain.pop();
      chain.push(p);
    }
    chain.pop();
    return chain;
  };
  return [...half(unique), ...half([...unique].reverse())];
}

/**
 * The smallest-area rectangle around the points. One side of the optimum lies along an edge
 * of the convex hull, so trying each hull edge as the axis finds it; hulls of text regions
 * have tens of points, so the quadratic search costs nothing.
 */
export function minAreaRectangle(points: readonly Point[]): Rectangle {
  const hull = convexHull(points);
  const first = hull[0];
  if (!first) throw new RangeError('minAreaRectangle needs at least one point');
  const axes: Point[] = hull.length === 1 ? [[1, 0]] : hull.map((p, i) => unit(p, hull[(i + 1) % hull.length]!));
  let best: Rectangle | undefined;
  for (const axis of axes) {
    const rect = boundsAlong(hull, axis);
    if (!best || rect.width * rect.height < best.width * best.height) best = rect;
  }
  return best!;
}

function unit(from: Point, to: Point): Point {
  const dx = to[0] - from[0];
  const dy = to[1] - from[1];
  const length = Math.hypot(dx, dy);
  return [dx / length, dy / length];
}

function boundsAlong(points: readonly Point[], axis: Point): Rectangle {
  const [ux, uy] = axis;
  let minU = Infinity;
  let maxU = -Infinity;
  let minV = Infinity;
  let maxV = -Infinity;
  for (const [x, y] of points) {
    const u = x * ux + y * uy;
    const v = -x * uy + y * ux;
    minU = Math.min(minU, u);
    maxU = Math.max(maxU, u);
    minV = Math.min(minV, v);
    maxV = Math.max(maxV, v);
  }
  const cu = (minU + maxU) / 2;
  const cv = (minV + maxV) / 2;
  return { center: [cu * ux - cv * uy, cu * uy + cv * ux], axis, width: maxU - minU, height: maxV - minV };
}

/**
 * Grows a rectangle outward by area × ratio / perimeter on every side: DB's "unclip", which
 * undoes the shrinking its training applied to text regions. Offsetting a rectangle with
 * round joins and taking the minimum-area rectangle of the result (what PaddleOCR does with
 * a polygon clipper) gives exactly this.
 */
export function unclip(rect: Rectangle, ratio: number): Rectangle {
  const perimeter = 2 * (rect.width + rect.height);
  if (perimeter === 0) return rect;
  const grow = (rect.width * rect.height * ratio) / perimeter;
  return { ...rect, width: rect.width + 2 * grow, height: rect.height + 2 * grow };
}

/**
 * The rectangle's corners in reading order. The two leftmost corners are the left side (the
 * upper of them top-left), the two rightmost the right side, so a line's box reads left to
 * right whichever way the minimum rectangle's axis points.
 */
export function cornersOf(rect: Rectangle): Quad {
  const [cx, cy] = rect.center;
  const [ux, uy] = rect.axis;
  const hw = rect.width / 2;
  const hh = rect.height / 2;
  const corner = (su: number, sv: number): Point => [
    cx + su * hw * ux - sv * hh * uy,
    cy + su * hw * uy + sv * hh * ux,
  ];
  const byX = [corner(-1, -1), corner(1, -1), corner(1, 1), corner(-1, 1)].sort((a, b) => a[0] - b[0]);
  const [left1, left2, right1, right2] = byX as [Point, Point, Point, Point];
  const [topLeft, bottomLeft] = left1[1] <= left2[1] ? [left1, left2] : [left2, left1];
  const [topRight, bottomRight] = right1[1] <= right2[1] ? [right1, right2] : [right2, right1];
  return [topLeft, topRight, bottomRight, bottomLeft];
}

/** Whether a point lies inside a convex quadrilateral or on its edge. */
export function insideQuad(quad: Quad, point: Point): boolean {
  let sign = 0;
  for (let i = 0; i < 4; i++) {
    const side = cross(quad[i]!, quad[(i + 1) % 4]!, point);
    if (Math.abs(side) < 1e-9) continue;
    if (sign !== 0 && Math.sign(side) !== sign) return false;
    sign = Math.sign(side);
  }
  return true;
}

export const distance = (a: Point, b: Point): number => Math.hypot(a[0] - b[0], a[1] - b[1]);
