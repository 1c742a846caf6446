import type { TestContext } from 'node:test';

const KEY = 'batchserveTestGate';

/**
 * Model config lines that make the served handler wait on a HandlerGate before each forward
 * pass. The handler runs in the main thread (`runtime.thread: main`), the test's own process,
 * which is what lets it reach the gate through globalThis.
 */
export const GATED_CONFIG = 'runtime:\n  thread: main\n';

/** A handler that hands each batch's values to the gate and waits until the gate lets it go. */
export const GATED_HANDLER = `export async function inference(inputs, context) {
  const gate = globalThis.${KEY};
  if (gate) await gate.enter(Array.from(inputs.x.data));
  return context.builtins.tensor.inference(inputs, context);
}
`;

/**
 * Decides when a served instance frees, so that tests order events instead of sleeping. It
 * starts open, so that warm-up passes go through; after `hold()` each release lets exactly
 * one batch through: a held one, or else the next to arrive.
 */
export class HandlerGate {
  /** The values of each batch, in the order the batches reached the handler. */
  readonly entered: number[][] = [];
  private readonly held: (() => void)[] = [];
  private credits = 0;
  private open = true;
  private arrivals: { count: number; resolve: () => void }[] = [];

  enter(values: number[]): Promise<void> {
    this.entered.push(values);
    this.arrivals = this.arrivals.filter((waiter) => {
      if (this.entered.length < waiter.count) return true;
      waiter.resolve();
      return false;
    });
    if (this.open) return Promise.resolve();
    if (this.credits > 0) {
      this.credits -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.held.push(resolve));
  }

  /** From now on batches wait for a release; only they are recorded in `entered`. */
  hold(): void {
    this.open = false;
    this.entered.length = 0;
  }

  /** Resolves once `count` batches have reached the handler. */
  reached(count: number): Promise<void> {
    if (this.entered.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.arrivals.push({ count, resolve }));
  }

  /** Lets one batch run: the oldest held one, or the next to arrive. */
  release(): void {
    const next = this.held.shift();
    if (next) next();
    else this.credits += 1;
  }

  /** Lets every held and future batch run. */
  openAll(): void {
    this.open = true;
    for (const next of this.held.splice(0)) next();
  }
}

/**
 * Installs a gate for the served handler; it opens and goes when the test ends. Install it
 * before starting the server: cleanup runs in order, and the server's close waits for every
 * admitted request, so the gate must open first.
 */
export function installGate(t: TestContext): HandlerGate {
  const gate = new HandlerGate();
  (globalThis as Record<string, unknown>)[KEY] = gate;
  t.after(() => {
    gate.openAll();
    delete (globalThis as Record<string, unknown>)[KEY];
  });
  return gate;
}

/**
 * Waits until `condition` holds, checking it every millisecond or so: the state it reads is
 * the server's own (queued rows, a model's state, a gauge). The deadline only turns a bug that
 * never meets it into a failure instead of a hang.
 */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  what: string,
  deadlineMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** `promise`, or a failure naming `what` after `ms`: a bug that never answers fails instead of hanging. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new Error(`not within ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
