/**
 * Inline SVG charts for the HTML report, drawn here with no library: the page must open with
 * no network. A chart is its series and axes' labels; this file places them on the plot.
 */

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/**
 * Okabe and Ito's palette, safe for the common colour blindnesses, less its yellow, which is
 * lost on white. The marker's shape changes with the colour, so series stay apart in grey and
 * past the seventh colour: a (colour, shape) pair comes back only after 35 series.
 */
const PALETTE = ['#0072b2', '#e69f00', '#009e73', '#d55e00', '#cc79a7', '#56b4e9', '#000000'];
const SHAPES = ['circle', 'square', 'triangle', 'diamond', 'inverted triangle'] as const;

export type Shape = (typeof SHAPES)[number];

/** The colour and marker of a chart's `index`th series. */
export function look(index: number): { readonly color: string; readonly shape: Shape } {
  return { color: PALETTE[index % PALETTE.length] as string, shape: SHAPES[index % SHAPES.length] as Shape };
}

export type XY = readonly [x: number, y: number];

export interface Series {
  readonly name: string;
  readonly color: string;
  /** The dots' marker; a circle when not given. */
  readonly shape?: Shape;
  /** Each run is joined by a line; dots mark every point. */
  readonly runs: readonly (readonly XY[])[];
  readonly line: boolean;
  readonly dots: boolean;
  readonly dashed?: boolean;
  /** Hollow markers, so they stay visible where another series' dots sit. */
  readonly ring?: boolean;
  /** Hover text per dot, in the order of the flattened runs. */
  readonly tips?: readonly string[];
  /** Which measured point each dot is (describePoint), in the same order, as `data-point`. */
  readonly points?: readonly string[];
}

export interface Chart {
  readonly id: string;
  readonly title: string;
  readonly description: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly Series[];
  /** A horizontal dashed line across the whole plot, named on it: the p99 SLO, the speedup ceiling. */
  readonly reference?: { readonly kind: 'slo' | 'ceiling'; readonly name: string; readonly y: number };
  /** One point ringed and named on the plot: the recommendation. */
  readonly marked?: { readonly at: XY; readonly point: string; readonly label: string; readonly legend: string };
  readonly logY?: boolean;
  readonly empty?: string;
}

const WIDTH = 820;
const HEIGHT = 380;
const MARGIN = { left: 64, right: 260, top: 16, bottom: 52 };

interface Axis {
  readonly ticks: readonly number[];
  readonly toPixel: (value: number) => number;
}

export function svgChart(chart: Chart): string {
  const plotRight = WIDTH - MARGIN.right;
  const plotBottom = HEIGHT - MARGIN.bottom;
  const all = chart.series.flatMap((s) => s.runs.flat());
  const ys = [...all.map(([, y]) => y), ...(chart.reference ? [chart.reference.y] : [])];
  const x = linearAxis(Math.max(0, ...all.map(([v]) => v)), MARGIN.left, plotRight);
  const y =
    chart.logY === true
      ? logAxis(
          ys.filter((v) => v > 0),
          plotBottom,
          MARGIN.top,
        )
      : linearAxis(Math.max(0, ...ys), plotBottom, MARGIN.top);
  const parts: string[] = [
    `<title id="${chart.id}-title">${escapeHtml(chart.title)}</title>`,
    `<desc id="${chart.id}-desc">${escapeHtml(chart.description)}</desc>`,
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotRight - MARGIN.left}" height="${plotBottom - MARGIN.top}" fill="#fcfcfc" stroke="#ccc"/>`,
    ...x.ticks.map((t) => {
      const px = fixed(x.toPixel(t));
      return `<line x1="${px}" x2="${px}" y1="${MARGIN.top}" y2="${plotBottom}" stroke="#eee"/><text x="${px}" y="${plotBottom + 16}" text-anchor="middle">${tickLabel(t)}</text>`;
    }),
    ...y.ticks.map((t) => {
      const py = fixed(y.toPixel(t));
      return `<line x1="${MARGIN.left}" x2="${plotRight}" y1="${py}" y2="${py}" stroke="#eee"/><text x="${MARGIN.left - 6}" y="${py}" dy="4" text-anchor="end">${tickLabel(t)}</text>`;
    }),
    `<text x="${(MARGIN.left + plotRight) / 2}" y="${HEIGHT - 12}" text-anchor="middle">${escapeHtml(chart.xLabel)}</text>`,
    `<text transform="translate(16 ${(MARGIN.top + plotBottom) / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(chart.yLabel)}</text>`,
  ];
  if (chart.empty !== undefined) {
    parts.push(
      `<text x="${(MARGIN.left + plotRight) / 2}" y="${(MARGIN.top + plotBottom) / 2}" text-anchor="middle" fill="#888">${escapeHtml(chart.empty)}</text>`,
    );
  }
  if (chart.reference) {
    const { kind, name, y: value } = chart.reference;
    const py = y.toPixel(value);
    parts.push(
      `<g data-reference="${kind}"><line x1="${MARGIN.left}" x2="${plotRight}" y1="${fixed(py)}" y2="${fixed(py)}" stroke="#555" stroke-dasharray="6 4"><title>${escapeHtml(name)}</title></line>` +
        `<text x="${plotRight - 4}" y="${fixed(py - 5)}" text-anchor="end" fill="#333">${escapeHtml(name)}</text></g>`,
    );
  }
  for (const s of chart.series) parts.push(drawSeries(s, x, y));
  // Drawn last, so no series' line or dot hides it.
  if (chart.marked) parts.push(drawMarked(chart.marked, x.toPixel(chart.marked.at[0]), y.toPixel(chart.marked.at[1])));
  parts.push(legend(chart));
  return `<figure>\n<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${escapeHtml(chart.title)}" aria-labelledby="${chart.id}-title ${chart.id}-desc">\n${parts.join('\n')}\n</svg>\n<figcaption>${escapeHtml(chart.description)}</figcaption>\n</figure>`;
}

function drawSeries(s: Series, x: Axis, y: Axis): string {
  const at = ([vx, vy]: XY): [number, number] => [x.toPixel(vx), y.toPixel(vy)];
  const lines = s.line
    ? s.runs.map(
        (run) =>
          `<polyline points="${run.map((point) => at(point).map(fixed).join(',')).join(' ')}" fill="none" ${stroke(s)}/>`,
      )
    : [];
  const dots = s.dots
    ? s.runs.flat().map((point, i) => {
        const tip = s.tips?.[i];
        const id = s.points?.[i];
        const inside = tip === undefined ? '' : `<title>${escapeHtml(tip)}</title>`;
        return marker(s, ...at(point), inside, id === undefined ? '' : ` data-point="${escapeHtml(id)}"`);
      })
    : [];
  return `<g data-series="${escapeHtml(s.name)}">${[...lines, ...dots].join('')}</g>`;
}

function stroke(s: Pick<Series, 'color' | 'dashed'>): string {
  return `stroke="${s.color}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ''}`;
}

function marker(
  s: Pick<Series, 'color' | 'ring' | 'shape'>,
  cx: number,
  cy: number,
  inside = '',
  attributes = '',
): string {
  const shape = s.shape ?? 'circle';
  const paint =
    s.ring === true ? `fill="none" stroke="${s.color}" stroke-width="2"` : `fill="${s.color}" stroke="#fff"`;
  return `<path d="${outline(shape, cx, cy, s.ring === true ? 6 : 4.5)}" data-shape="${shape}"${attributes} ${paint}>${inside}</path>`;
}

/**
 * Two black rings around the point, wider than any series' marker so it shows whatever its
 * colour, and the word on the plot beside it, above unless the point is near the top.
 */
function drawMarked(marked: NonNullable<Chart['marked']>, cx: number, cy: number): string {
  const label = escapeHtml(marked.label);
  const textY = cy - MARGIN.top < 28 ? cy + 26 : cy - 18;
  return (
    `<g data-recommended="${escapeHtml(marked.point)}" aria-label="${label}"><title>${label}</title>${rings(cx, cy, 9)}` +
    `<text x="${fixed(cx)}" y="${fixed(textY)}" text-anchor="middle" font-weight="bold">recommended</text></g>`
  );
}

function rings(cx: number, cy: number, r: number): string {
  const ring = (radius: number, width: number): string =>
    `<circle cx="${fixed(cx)}" cy="${fixed(cy)}" r="${radius}" fill="none" stroke="#000" stroke-width="${width}"/>`;
  return ring(r, 2.5) + ring(r + 4, 1);
}

/** A shape of about the same area whatever it is, centred on (cx, cy). */
function outline(shape: Shape, cx: number, cy: number, r: number): string {
  const path = (corners: readonly XY[]): string =>
    `M${corners.map(([dx, dy]) => `${fixed(cx + dx * r)},${fixed(cy + dy * r)}`).join('L')}Z`;
  switch (shape) {
    case 'circle':
      return `M${fixed(cx - r)},${fixed(cy)}a${r},${r} 0 1,0 ${2 * r},0a${r},${r} 0 1,0 ${-2 * r},0Z`;
    case 'square':
      return path([
        [-0.9, -0.9],
        [0.9, -0.9],
        [0.9, 0.9],
        [-0.9, 0.9],
      ]);
    case 'triangle':
      return path([
        [0, -1.3],
        [1.2, 0.8],
        [-1.2, 0.8],
      ]);
    case 'diamond':
      return path([
        [0, -1.25],
        [1.25, 0],
        [0, 1.25],
        [-1.25, 0],
      ]);
    case 'inverted triangle':
      return path([
        [0, 1.3],
        [1.2, -0.8],
        [-1.2, -0.8],
      ]);
  }
}

function legend(chart: Chart): string {
  const entries: Series[] = [...chart.series];
  if (chart.reference) {
    entries.push({ name: chart.reference.name, color: '#555', runs: [], line: true, dots: false, dashed: true });
  }
  const left = WIDTH - MARGIN.right + 14;
  return `<g>${entries
    .map((e, i) => {
      const cy = MARGIN.top + 10 + i * 20;
      const line = e.line ? `<line x1="${left}" x2="${left + 22}" y1="${cy}" y2="${cy}" ${stroke(e)}/>` : '';
      const dot = e.dots ? marker(e, left + 11, cy) : '';
      return `${line}${dot}<text x="${left + 30}" y="${cy}" dy="4">${escapeHtml(e.name)}</text>`;
    })
    .join('')}${markedEntry(chart, left, MARGIN.top + 10 + entries.length * 20)}</g>`;
}

function markedEntry(chart: Chart, left: number, cy: number): string {
  if (!chart.marked) return '';
  return `${rings(left + 11, cy, 4)}<text x="${left + 30}" y="${cy}" dy="4">${escapeHtml(chart.marked.legend)}</text>`;
}

/** 0 to a round number at or above `max`, in steps of 1, 2 or 5 × 10^k. */
function linearAxis(max: number, from: number, to: number): Axis {
  const raw = (max > 0 ? max : 1) / 5;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 5, 10].find((f) => f * magnitude >= raw) ?? 10) * magnitude;
  const top = Math.ceil((max > 0 ? max : 1) / step) * step;
  const ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
  return { ticks, toPixel: (v) => from + ((to - from) * v) / top };
}

/** Whole decades around the values, with 2 and 5 between them when there are few decades. */
function logAxis(values: readonly number[], from: number, to: number): Axis {
  const low = Math.floor(Math.log10(Math.min(...values)));
  const high = Math.max(low + 1, Math.ceil(Math.log10(Math.max(...values))));
  const decades = Array.from({ length: high - low + 1 }, (_, i) => 10 ** (low + i));
  const ticks = high - low <= 2 ? decades.flatMap((d) => [d, 2 * d, 5 * d]).filter((t) => t <= 10 ** high) : decades;
  return { ticks, toPixel: (v) => from + ((to - from) * (Math.log10(Math.max(v, 10 ** low)) - low)) / (high - low) };
}

function tickLabel(value: number): string {
  return String(Number(value.toPrecision(6)));
}

function fixed(pixel: number): string {
  return pixel.toFixed(1);
}
