import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';

/** How much of the CPU the instances run on would sit unused while a batch waits. */
export interface CoreShare {
  /** 1: a wait leaves the instance's core idle; near 0: the core has other work for the whole wait. */
  idleShare(): number;
}

/** An instance with a core of its own: waiting idles it. */
export const OWN_CORE: CoreShare = { idleShare: () => 1 };

/** Utilisation is measured over at least this long, ms. */
const SAMPLE_MS = 100;

/**
 * A process confined to one CPU (`taskset -c 0`, a one-CPU affinity mask) runs its HTTP work,
 * its instances and everything else on that core: while a batch waits, the core parses the very
 * requests it waits for, so the wait idles only the part of it the process leaves unused,
 * 1 − its CPU utilisation (process.cpuUsage, every thread, over the last 100 ms or more).
 * With more CPUs an instance is taken to have one of its own. A CPU quota (a container's
 * `cpu.max`) is not an affinity mask and is not seen: such a process counts as having its own core.
 */
export class ProcessCoreShare implements CoreShare {
  #sampledAt = performance.now();
  #cpu = process.cpuUsage();
  #share = 1;

  idleShare(): number {
    const now = performance.now();
    const elapsedMs = now - this.#sampledAt;
    if (elapsedMs < SAMPLE_MS) return this.#share;
    const cpu = process.cpuUsage();
    const usedMs = (cpu.user - this.#cpu.user + cpu.system - this.#cpu.system) / 1000;
    this.#share = Math.min(1, Math.max(0, 1 - usedMs / elapsedMs));
    this.#sampledAt = now;
    this.#cpu = cpu;
    return this.#share;
  }
}

let shared: CoreShare | undefined;

/** The CoreShare of this process, one for all its batchers: measured when it has one CPU, else OWN_CORE. */
export function processCoreShare(): CoreShare {
  shared ??= availableParallelism() === 1 ? new ProcessCoreShare() : OWN_CORE;
  return shared;
}
