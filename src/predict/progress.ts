/** Where a job stands, as progress reports show it. */
export interface ProgressSnapshot {
  /** Rows this job scores. */
  readonly total: number;
  /** Rows written, including those a resumed job found done. */
  readonly done: number;
  /** Rows done when this run started (a resumed job's head start). */
  readonly startedAt: number;
  readonly failed: number;
  /** Rows the checkpoint holds. */
  readonly saved: number;
  readonly elapsedMs: number;
}

export type ProgressMode = 'bar' | 'lines' | 'quiet';

export interface ProgressOptions {
  readonly mode: ProgressMode;
  readonly write: (text: string) => void;
  /** How often a line is printed in `lines` mode; the bar redraws ten times a second. */
  readonly intervalMs: number;
  readonly snapshot: () => ProgressSnapshot;
  /** The bar's width in characters, all told. */
  readonly columns?: number;
}

/**
 * Progress on stderr: a one-line bar redrawn in place on a terminal, a plain line every
 * interval otherwise (logs, CI), nothing when quiet. Timers never keep the process alive.
 */
export function startProgress(options: ProgressOptions): { stop(): void } {
  if (options.mode === 'quiet') return { stop: () => undefined };
  const draw = (): void => {
    const snapshot = options.snapshot();
    options.write(
      options.mode === 'bar' ? `\r${renderBar(snapshot, options.columns ?? 80)}\x1b[K` : `${renderLine(snapshot)}\n`,
    );
  };
  const timer = setInterval(draw, options.mode === 'bar' ? 100 : options.intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      if (options.mode === 'bar') {
        draw();
        options.write('\n');
      }
    },
  };
}

/**
 * `[#######.......] 4,500/10,000  812 rows/s  ETA 7s  3 failed` in `columns - 1` characters:
 * writing the last column makes some terminals wrap.
 */
export function renderBar(snapshot: ProgressSnapshot, columns: number): string {
  const { rate, eta } = pace(snapshot);
  const tail = ` ${count(snapshot.done)}/${count(snapshot.total)}  ${rate} rows/s  ETA ${eta}  ${snapshot.failed} failed`;
  const width = Math.max(10, columns - tail.length - 3);
  const filled = snapshot.total === 0 ? width : Math.round((snapshot.done / snapshot.total) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]${tail}`;
}

/** `predict: 4500/10000 rows (45.0%), 812 rows/s, ETA 7s, 3 failed, 4000 saved` */
export function renderLine(snapshot: ProgressSnapshot): string {
  const { rate, eta } = pace(snapshot);
  const percent = snapshot.total === 0 ? 100 : (snapshot.done / snapshot.total) * 100;
  return `predict: ${snapshot.done}/${snapshot.total} rows (${percent.toFixed(1)}%), ${rate} rows/s, ETA ${eta}, ${snapshot.failed} failed, ${snapshot.saved} saved`;
}

/** Rows per second over this run, and the time left at that pace. */
function pace(snapshot: ProgressSnapshot): { rate: string; eta: string } {
  const rows = snapshot.done - snapshot.startedAt;
  const perSecond = snapshot.elapsedMs > 0 ? (rows * 1000) / snapshot.elapsedMs : 0;
  const left = snapshot.total - snapshot.done;
  return {
    rate: perSecond >= 100 ? perSecond.toFixed(0) : perSecond.toFixed(1),
    eta: left === 0 ? '0s' : perSecond > 0 ? duration(left / perSecond) : '?',
  };
}

/** 7s, 3m05s, 2h01m */
export function duration(seconds: number): string {
  const whole = Math.round(seconds);
  if (whole < 60) return `${whole}s`;
  if (whole < 3600) return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
  return `${Math.floor(whole / 3600)}h${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')}m`;
}

function count(value: number): string {
  return value.toLocaleString('en-US');
}
