import type { Logger } from 'pino';
import { realClock, type Clock } from '../batching/clock.js';
import { trafficSpec } from '../config/model-policy.js';
import { formatDuration } from '../config/schema-kit.js';
import { CanaryConflictError, CanaryNotFoundError } from '../core/errors.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import { breachesOf, holdReason } from './canary-guardrails.js';
import { formatAmount, formatRate, type CanarySettings } from './canary-settings.js';
import type { ShadowComparison } from './shadow-compare.js';
import type { VersionRouter } from './version-router.js';
import { VersionWindow, type FeedbackQuality, type WindowFigures } from './version-window.js';

/** What feedback tells a canary (`TrafficControl.feedbackReceived`), offered with the canary's other types. */
export type { FeedbackQuality } from './version-window.js';

export type CanaryState = 'running' | 'promoted' | 'rolled_back';

export interface CanaryEvent {
  readonly at: string;
  readonly event: 'started' | 'advanced' | 'held' | 'promoted' | 'rolled_back' | 'resumed';
  /** The candidate's percent of traffic after the event. */
  readonly weight: number;
  readonly reason?: string;
  readonly candidate?: WindowFigures;
  readonly stable?: WindowFigures;
}

/** A canary as it is persisted: enough to resume it after a restart. */
export interface CanaryRecord {
  readonly model: string;
  readonly stable: string;
  readonly candidate: string;
  readonly settings: CanarySettings;
  state: CanaryState;
  /** Index into settings.steps. */
  step: number;
  readonly started_at: string;
  step_started_at: string;
  ended_at?: string;
  reason?: string;
  history: CanaryEvent[];
}

export interface CanaryStatus {
  readonly model: string;
  readonly state: CanaryState;
  readonly stable: string;
  readonly candidate: string;
  /** 1-based, of `steps.length`. */
  readonly step: number;
  readonly steps: readonly number[];
  readonly weight: number;
  readonly interval: string;
  readonly max_error_rate: string;
  readonly max_p99: string | null;
  readonly min_requests: number;
  readonly min_agreement: string | null;
  readonly agreement_tolerance: number | null;
  /** Absolute (accuracy points or reward units), so a plain number rather than a percentage. */
  readonly max_quality_drop: string | null;
  readonly started_at: string;
  readonly step_started_at: string;
  readonly next_check_at: string | null;
  readonly ended_at: string | null;
  readonly reason: string | null;
  /** This step's figures so far, per version; empty once the canary ended. */
  readonly live: Readonly<Record<string, WindowFigures>>;
  readonly history: readonly CanaryEvent[];
}

/** Keeps the history readable and the state file small on a canary that holds for days. */
const HISTORY_LIMIT = 200;

/** The batcher's clock, plus the wall clock that dates the history and the status. */
export interface CanaryClock extends Clock {
  /** Milliseconds since the epoch. */
  wallNow(): number;
}

/** Real time; its timers are unref'd so that a canary never keeps the process alive. */
export const realCanaryClock: CanaryClock = {
  ...realClock,
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  wallNow: () => Date.now(),
};

interface RunningCanary {
  readonly record: CanaryRecord;
  readonly stable: VersionWindow;
  readonly candidate: VersionWindow;
  /** The next check; each check arms the one after it. */
  timer: unknown;
}

export interface CanaryDependencies {
  readonly repository: ModelRepository;
  readonly router: VersionRouter;
  readonly metrics: ServerMetrics;
  /** Called after every change of a canary, to persist it. */
  readonly changed: () => void;
  readonly logger: Logger;
  /** Default: real time. */
  readonly clock?: CanaryClock;
}

/** `shadow_tolerance`'s default, for a canary whose model has no traffic policy to take it from. */
const DEFAULT_AGREEMENT_TOLERANCE = trafficSpec.fields.shadow_tolerance.default;

/**
 * Moves a model's traffic to a candidate version step by step, judging each step against its
 * guardrails (canary-guardrails.ts), and rolls back to 100 % stable at the first breach,
 * judged as each result arrives (once its sample holds `min_requests`) and again at each
 * step's check:
 * - the candidate's error rate and p99, which at the check breach without a minimum of
 *   requests — a canary errs on the safe side;
 * - with `min_agreement`, its agreement with the stable version: while the canary runs, every
 *   request the stable answers is mirrored to the candidate (the canary's shadow wins over
 *   the traffic policy's) and the two answers compared as shadows are; a mirrored copy that
 *   failed counts as not agreeing, since a candidate that errs does not agree;
 * - with `max_quality_drop`, the quality feedback shows for each version: accuracy from label
 *   feedback, else mean reward, the candidate's no more than the limit below the stable's.
 * Advancing needs `min_requests` of each sample the guardrails judge — requests, mirrored
 * answers, feedback per version — so a quiet step holds rather than passes unseen.
 */
export class CanaryController {
  readonly #records = new Map<string, CanaryRecord>();
  readonly #running = new Map<string, RunningCanary>();
  readonly #deps: CanaryDependencies;
  readonly #clock: CanaryClock;

  constructor(deps: CanaryDependencies) {
    this.#deps = deps;
    this.#clock = deps.clock ?? realCanaryClock;
  }

  /** The model's canary, running or ended, as it is persisted. */
  recordOf(name: string): CanaryRecord | undefined {
    return this.#records.get(name);
  }

  isRunning(name: string): boolean {
    return this.#running.has(name);
  }

  /** Takes canaries back from the state file; running ones resume at their step with a fresh window. */
  restore(record: CanaryRecord): void {
    this.#records.set(record.model, record);
    if (record.state !== 'running') return;
    record.step_started_at = this.#wallTime();
    this.#push(record, { event: 'resumed', reason: 'the server restarted; the step starts over' });
    this.#run(record);
  }

  start(name: string, settings: CanarySettings): CanaryStatus {
    if (this.#running.has(name)) {
      throw new CanaryConflictError(`model ${name} already has a running canary; promote or roll it back first`);
    }
    const { repository } = this.#deps;
    const candidate = repository.get(name, settings.version);
    if (candidate.state !== 'ready')
      throw new CanaryConflictError(`version ${candidate.version} is ${candidate.state}`);
    const stable = repository.defaultVersion(name) as string;
    if (stable === candidate.version) {
      throw new CanaryConflictError(
        `version ${stable} already is the default of ${name}; a canary needs another version to compare with`,
      );
    }
    repository.setDefault(name, stable);
    const now = this.#wallTime();
    const record: CanaryRecord = {
      model: name,
      stable,
      candidate: candidate.version,
      // Fixed at the start, so a later change of the traffic policy leaves a running canary's judgement alone.
      settings:
        settings.min_agreement === undefined || settings.agreement_tolerance !== undefined
          ? settings
          : {
              ...settings,
              agreement_tolerance: this.#deps.router.traffic(name)?.shadow_tolerance ?? DEFAULT_AGREEMENT_TOLERANCE,
            },
      state: 'running',
      step: 0,
      started_at: now,
      step_started_at: now,
      history: [],
    };
    this.#records.set(name, record);
    this.#push(record, { event: 'started' });
    this.#run(record);
    this.#deps.logger.info(
      { model: name, stable, candidate: candidate.version, steps: settings.steps },
      'canary started',
    );
    this.#deps.changed();
    return this.status(name);
  }

  status(name: string): CanaryStatus {
    const record = this.#records.get(name);
    if (!record) throw new CanaryNotFoundError(`model ${name} has no canary`);
    const running = this.#running.get(name);
    const { settings } = record;
    return {
      model: record.model,
      state: record.state,
      stable: record.stable,
      candidate: record.candidate,
      step: record.step + 1,
      steps: settings.steps,
      weight: weightOf(record),
      interval: formatDuration(settings.interval),
      max_error_rate: formatRate(settings.max_error_rate),
      max_p99: settings.max_p99 === undefined ? null : formatDuration(settings.max_p99),
      min_requests: settings.min_requests,
      min_agreement: settings.min_agreement === undefined ? null : formatRate(settings.min_agreement),
      agreement_tolerance: settings.agreement_tolerance ?? null,
      max_quality_drop: settings.max_quality_drop === undefined ? null : formatAmount(settings.max_quality_drop),
      started_at: record.started_at,
      step_started_at: record.step_started_at,
      next_check_at: running ? this.#nextCheck(record) : null,
      ended_at: record.ended_at ?? null,
      reason: record.reason ?? null,
      live: running
        ? { [record.stable]: running.stable.figures(), [record.candidate]: running.candidate.figures() }
        : {},
      history: record.history,
    };
  }

  /** Back to 100 % stable at once; the next request already goes there. */
  rollback(name: string, reason = 'rolled back by request'): CanaryStatus {
    this.#end(this.#requireRunning(name), 'rolled_back', reason);
    return this.status(name);
  }

  /** Ends the canary early: the candidate becomes the default and takes all traffic. */
  promote(name: string, reason = 'promoted by request'): CanaryStatus {
    this.#end(this.#requireRunning(name), 'promoted', reason);
    return this.status(name);
  }

  /** One finished request of any version; counted when it belongs to a running canary. */
  requestFinished(model: LoadedModel, status: number, seconds: number): void {
    const running = this.#running.get(model.name);
    if (running === undefined) return;
    if (model.version === running.record.candidate) running.candidate.record(status, seconds);
    else if (model.version === running.record.stable) running.stable.record(status, seconds);
    else return;
    this.#guard(running);
  }

  /**
   * One mirrored copy compared with the answer it shadowed; counted for a running canary with
   * `min_agreement` when the stable version served and the candidate answered the copy.
   */
  answersCompared(served: LoadedModel, shadow: LoadedModel, result: ShadowComparison): void {
    const running = this.#running.get(served.name);
    if (running === undefined || running.record.settings.min_agreement === undefined) return;
    if (served.version === running.record.stable && shadow.version === running.record.candidate) {
      running.candidate.recordComparison(result);
      this.#guard(running);
    }
  }

  /** One feedback joined to a prediction `model` made; counted when it belongs to a running canary. */
  feedbackReceived(model: LoadedModel, quality: FeedbackQuality): void {
    const running = this.#running.get(model.name);
    if (running === undefined) return;
    if (model.version === running.record.candidate) running.candidate.recordFeedback(quality);
    else if (model.version === running.record.stable) running.stable.recordFeedback(quality);
    else return;
    this.#guard(running);
  }

  /**
   * Protection does not wait for the step's check: every result is judged as it arrives, once
   * its guardrail's sample is in, and the first breach rolls back at once, recording every
   * guardrail broken then. The interval only paces promotion.
   */
  #guard(running: RunningCanary): void {
    const figures = { candidate: running.candidate.figures(), stable: running.stable.figures() };
    const { settings } = running.record;
    if (breachesOf(figures, settings, true).length === 0) return;
    // Recorded as the step's check would judge it then: every guardrail broken, each with its figures.
    this.#end(running.record, 'rolled_back', breachesOf(figures, settings).join('; '), figures);
  }

  close(): void {
    for (const running of this.#running.values()) this.#clock.clearTimeout(running.timer);
    this.#running.clear();
  }

  #requireRunning(name: string): CanaryRecord {
    const record = this.#records.get(name);
    if (!record) throw new CanaryNotFoundError(`model ${name} has no canary`);
    if (record.state !== 'running') {
      throw new CanaryConflictError(`the canary of ${name} already ended (${record.state.replace('_', ' ')})`);
    }
    return record;
  }

  #run(record: CanaryRecord): void {
    const { min_agreement: minAgreement, agreement_tolerance: tolerance } = record.settings;
    const running: RunningCanary = {
      record,
      stable: new VersionWindow(),
      candidate: new VersionWindow({ compares: minAgreement !== undefined }),
      timer: 0,
    };
    this.#running.set(record.model, running);
    this.#arm(running);
    this.#applySplit(record);
    if (minAgreement !== undefined) {
      this.#deps.router.setCanaryShadow(record.model, {
        version: record.candidate,
        tolerance: tolerance ?? DEFAULT_AGREEMENT_TOLERANCE,
      });
    }
  }

  #arm(running: RunningCanary): void {
    running.timer = this.#clock.setTimeout(
      () => {
        this.#judge(running.record);
        // A check that ended the canary arms nothing; neither does one whose canary was replaced.
        if (this.#running.get(running.record.model) === running) this.#arm(running);
      },
      Math.max(1, running.record.settings.interval / 1000),
    );
  }

  #judge(record: CanaryRecord): void {
    const running = this.#running.get(record.model);
    if (running === undefined) return;
    const { settings } = record;
    if (this.#deps.repository.peek(record.model, record.candidate)?.state !== 'ready') {
      this.#end(record, 'rolled_back', `version ${record.candidate} is no longer loaded`);
      return;
    }
    const figures = { candidate: running.candidate.figures(), stable: running.stable.figures() };
    const breaches = breachesOf(figures, settings);
    if (breaches.length > 0) {
      this.#end(record, 'rolled_back', breaches.join('; '), figures);
      return;
    }
    const reason = holdReason(figures, settings, weightOf(record));
    if (reason !== undefined) {
      const last = record.history.at(-1);
      if (last?.event === 'held' && last.weight === weightOf(record)) record.history.pop();
      this.#push(record, { event: 'held', reason, ...figures });
      this.#deps.changed();
      return;
    }
    if (record.step + 1 >= settings.steps.length) {
      this.#end(record, 'promoted', 'every step stayed inside the guardrails', figures);
      return;
    }
    record.step += 1;
    record.step_started_at = this.#wallTime();
    running.candidate.reset();
    running.stable.reset();
    this.#applySplit(record);
    this.#push(record, { event: 'advanced', ...figures });
    this.#deps.logger.info({ model: record.model, weight: weightOf(record) }, 'canary advanced');
    this.#deps.changed();
  }

  #end(
    record: CanaryRecord,
    state: 'promoted' | 'rolled_back',
    reason: string,
    figures: Pick<CanaryEvent, 'candidate' | 'stable'> = this.#liveFigures(record),
  ): void {
    const running = this.#running.get(record.model);
    if (running) this.#clock.clearTimeout(running.timer);
    this.#running.delete(record.model);
    record.state = state;
    record.reason = reason;
    record.ended_at = this.#wallTime();
    const { repository, router } = this.#deps;
    const winner = state === 'promoted' ? record.candidate : record.stable;
    if (repository.peek(record.model, winner)) repository.setDefault(record.model, winner);
    router.setCanarySplit(record.model, undefined);
    router.setCanaryShadow(record.model, undefined);
    this.#deps.metrics.canaryWeight(record.model, record.candidate, weightOf(record));
    this.#push(record, { event: state, reason, ...figures });
    this.#deps.logger[state === 'promoted' ? 'info' : 'warn'](
      { model: record.model, stable: record.stable, candidate: record.candidate, reason },
      state === 'promoted' ? 'canary promoted' : 'canary rolled back',
    );
    this.#deps.changed();
  }

  #liveFigures(record: CanaryRecord): Pick<CanaryEvent, 'candidate' | 'stable'> {
    const running = this.#running.get(record.model);
    return running ? { candidate: running.candidate.figures(), stable: running.stable.figures() } : {};
  }

  #applySplit(record: CanaryRecord): void {
    const weight = weightOf(record);
    this.#deps.router.setCanarySplit(record.model, { [record.stable]: 100 - weight, [record.candidate]: weight });
    this.#deps.metrics.canaryWeight(record.model, record.candidate, weight);
  }

  #push(record: CanaryRecord, event: Omit<CanaryEvent, 'at' | 'weight'>): void {
    record.history.push({ at: this.#wallTime(), weight: weightOf(record), ...event });
    if (record.history.length > HISTORY_LIMIT) record.history.splice(1, record.history.length - HISTORY_LIMIT);
  }

  #wallTime(): string {
    return new Date(this.#clock.wallNow()).toISOString();
  }

  #nextCheck(record: CanaryRecord): string {
    const started = Date.parse(record.step_started_at);
    const interval = record.settings.interval / 1000;
    const elapsed = Math.max(0, this.#clock.wallNow() - started);
    return new Date(started + (Math.floor(elapsed / interval) + 1) * interval).toISOString();
  }
}

function weightOf(record: CanaryRecord): number {
  if (record.state === 'promoted') return 100;
  if (record.state === 'rolled_back') return 0;
  return record.settings.steps[record.step] ?? 100;
}
