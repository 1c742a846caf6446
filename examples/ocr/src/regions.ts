import type { Point } from './geometry.js';

/** A probability map of one image: `height × width` values in [0, 1], row-major. */
export interface ProbabilityMap {
  readonly width: number;
  readonly height: number;
  readonly data: Float32Array;
}

/**
 * One connected set of pixels above the threshold. `outline` holds, for each row it covers,
 * its leftmost and rightmost pixel: all a convex hull needs, at a fraction of the pixels.
 */
export interface ConnectedRegion {
  readonly outline: readonly Point[];
  readonly pixels: number;
}

/**
 * The 8-connected regions of the pixels whose probability exceeds `threshold`, in the order
 * their first pixel is met scanning rows top to bottom; at most `limit` of them, so a noisy
 * map cannot make the rest of the pipeline quadratic.
 */
export function connectedRegions(map: ProbabilityMap, threshold: number, limit = Infinity): ConnectedRegion[] {
  const { width, height, data } = map;
  const visited = new Uint8Array(width * height);
  const stack = new Int32Array(width * height);
  const regions: ConnectedRegion[] = [];
  for (let start = 0; start < data.length && regions.length < limit; start++) {
    if (visited[start] || !((data[start] as number) > threshold)) continue;
    const rowExtent = new Map<number, [number, number]>();
    let pixels = 0;
    let top = 0;
    stack[top++] = start;
    visited[start] = 1;
    while (top > 0) {
      const index = stack[--top] as number;
      const x = index % width;
      const y = (index - x) / width;
      pixels++;
      const extent = rowExtent.get(y);
      if (!extent) rowExtent.set(y, [x, x]);
      else {
        extent[0] = Math.min(extent[0], x);
        extent[1] = Math.max(extent[1], x);
      }
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          if (nx < 0 || nx >= width) continue;
          const neighbour = ny * width + nx;
          if (visited[neighbour] || !((data[neighbour] as number) > threshold)) continue;
          visited[neighbour] = 1;
          stack[top++] = neighbour;
        }
      }
    }
    const outline: Point[] = [];
    for (const [y, [left, right]] of [...rowExtent].sort((a, b) => a[0] - b[0])) {
      outline.push([left, y]);
      if (right !== left) outline.push([right, y]);
    }
    regions.push({ outline, pixels });
  }
  return regions;
}
