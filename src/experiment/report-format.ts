/** How report figures are written, in the verdict's text and in the CLI's table alike. */

/** 3841 → "3,841". */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** Four significant digits, without trailing zeros: 0.0166666 → "0.01667". */
export function formatFigure(x: number): string {
  return String(Number(x.toPrecision(4)));
}

/** Two significant digits, exponent form when tiny: "0.0012", "3.4e-9"; "—" when undefined. */
export function formatP(p: number | null): string {
  return p === null ? '—' : String(Number(p.toPrecision(2)));
}
