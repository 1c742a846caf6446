// The demo's synthetic text line, shared by demo-client.js and demo-images.js.
import { PNG } from 'pngjs';

/** A 192×48 "text line": dark glyph-like strokes on white, with ascenders at the top. */
export function textLine(upsideDown) {
  const width = 192;
  const height = 48;
  const image = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [sx, sy] = upsideDown ? [width - 1 - x, height - 1 - y] : [x, y];
      const glyph = sx % 14 < 9 && sy > 18 && sy < 38;
      const ascender = sx % 28 < 3 && sy > 6 && sy <= 18;
      const ink = (glyph && (sx % 14 < 2 || sy < 21 || sy > 35)) || ascender;
      image.data.set(ink ? [25, 25, 25, 255] : [245, 245, 240, 255], (y * width + x) * 4);
    }
  }
  return PNG.sync.write(image);
}
