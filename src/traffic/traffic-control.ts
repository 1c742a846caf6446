import type { Logger } from 'pino';
import { validateField } from '../config/schema-kit.js';
import { CanaryConflictError, ConfigInvalidError, ModelNotFoundError } from '../core/errors.js';
import { quoted } from '../core/quote.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import { CanaryController, type CanaryClock, type CanaryStatus } from './canary.js';
import { parseCanarySettings } from './canary-settings.js';
import type { RoutingStateFile } from './routing-state.js';
import { type ModelRouting } from './routing-state.js';
import { answersAgree } from './shadow-compare.js';
import { trafficProblems, trafficSpec, type ModelPolicy, type TrafficPolicy } from '../config/model-policy.js';
import { VersionRouter } from './version-router.js';
import type { FeedbackQuality } from './version-window.js';

export interface TrafficView {
  readonly model: string;
  readonly default_version: string | null;
  readonly versions: readonly { version: string; state: string }[];
  readonly traffic: TrafficPolicy | null;
  /** The split in force: a running canary's, else the configured one; null = all to the default. */
  readonly split: Readonly<Record<string, number>> | null;
  readonly canary: CanaryStatus['state'] | null;
}

export interface TrafficControlOptions {
  readonly repository: ModelRepository;
  readonly metrics: ServerMetrics;
  readonly logger: Logger;
  readonly policies: Readonly<Record<string, ModelPolicy>>;
  readonly stateFile: RoutingStateFile;
  /** What the state file held at start, read before the models load so a broken one fails fast. */
  readonly saved: ReadonlyMap<string, ModelRouting>;
  /** Times the canaries' checks; default: real time. Injectable so a test can drive a canary. */
  readonly clock?: CanaryClock;
  /**
   * Whether feedback on the model's predictions can be joined to the version that made them
   * (it needs their prediction log); a canary guarded on quality needs that. Absent: never.
   */
  readonly feedbackJoins?: (model: string) => boolean;
}

/**
 * Everything that decides which version answers: default versions, A/B splits, shadows and
 * canaries, with their run-time changes kept in the state file. The management API and the
 * inference routes talk only to this.
 */
export class TrafficControl {
  readonly router: VersionRouter;
  readonly #canaries: CanaryController;
  readonly #options: TrafficControlOptions;
  readonly #file: RoutingStateFile;
  /** Models with config or saved state, loaded or not, so saving never drops one. */
  readonly #known = new Set<string>();

  private constructor(options: TrafficControlOptions) {
    this.#options = options;
    this.#file = options.stateFile;
    this.router = new VersionRouter(options.repository);
    this.#canaries = new CanaryController({
      repository: options.repository,
      router: this.router,
      metrics: options.metrics,
      logger: options.logger,
      changed: () => void this.#save(),
      clock: options.clock,
    });
  }

  /**
   * Applies server.yaml's policies, then the state file's run-time changes over them. Opened
   * once the start-up models are loaded, so a resumed canary never judges a version that is
   * still loading.
   */
  static open(options: TrafficControlOptions): TrafficControl {
    const control = new TrafficControl(options);
    const { repository, saved } = options;
    for (const name of new Set([...Object.keys(options.policies), ...saved.keys()])) {
      control.#known.add(name);
      const policy = options.policies[name];
      const state = saved.get(name);
      repository.configureDefault(name, policy?.default_version);
      // Run-time defaults are exactly those saved: server.yaml's stays apart, never in the file.
      repository.chooseDefault(name, state?.default_version);
      const traffic = state?.traffic ?? policy?.traffic;
      if (traffic !== undefined) control.router.setTraffic(name, traffic);
      if (state?.canary) control.#canaries.restore(state.canary);
    }
    return control;
  }

  view(name: string): TrafficView {
    const { repository } = this.#options;
    const versions = repository.versions(name);
    if (versions.length === 0) throw new ModelNotFoundError(`unknown model ${quoted(name)}`);
    const canary = this.#canaries.recordOf(name);
    return {
      model: name,
      default_version: repository.defaultVersion(name) ?? null,
      versions: versions.map((model) => ({ version: model.version, state: model.state })),
      traffic: this.router.traffic(name) ?? null,
      split: this.router.effectiveSplit(name) ?? null,
      canary: canary?.state ?? null,
    };
  }

  /** Replaces the model's traffic policy; `{}` clears it. */
  async setTraffic(name: string, raw: unknown): Promise<TrafficView> {
    const versions = this.#options.repository.versions(name);
    if (versions.length === 0) throw new ModelNotFoundError(`unknown model ${quoted(name)}`);
    const problems: string[] = [];
    const traffic = validateField({ ...trafficSpec, optional: false }, raw, 'traffic', problems) as TrafficPolicy;
    if (traffic) problems.push(...trafficProblems(traffic, 'traffic'));
    const loaded = new Set(versions.map((model) => model.version));
    for (const version of [...Object.keys(traffic?.split ?? {}), ...(traffic?.shadow ? [traffic.shadow] : [])]) {
      if (!loaded.has(version))
        problems.push(`traffic: version "${version}" of ${name} is not loaded (loaded: ${[...loaded].join(', ')})`);
    }
    if (problems.length > 0) throw new ConfigInvalidError('the traffic request', problems);
    if (traffic.split && this.#canaries.isRunning(name)) {
      throw new CanaryConflictError(`a canary owns the split of ${name}; promote or roll it back first`);
    }
    const empty = traffic.split === undefined && traffic.sticky_key === undefined && traffic.shadow === undefined;
    this.router.setTraffic(name, empty ? undefined : traffic);
    await this.#save();
    return this.view(name);
  }

  /** Versions were loaded or unloaded: a run-time default on one taken away no longer stands. */
  versionsChanged(): Promise<void> {
    return this.#save();
  }

  async setDefault(name: string, version: string): Promise<void> {
    this.#options.repository.setDefault(name, version);
    await this.#save();
  }

  async startCanary(name: string, raw: unknown): Promise<CanaryStatus> {
    const settings = parseCanarySettings(raw);
    if (settings.max_quality_drop !== undefined && !(this.#options.feedbackJoins?.(name) ?? false)) {
      throw new CanaryConflictError(
        `max_quality_drop needs the prediction log of ${name} (prediction_log in its config or serve --prediction-log DIR): feedback joins to predictions through it`,
      );
    }
    // The configured split would take over again when the canary ends, undoing its verdict.
    if (this.router.traffic(name)?.split) {
      throw new CanaryConflictError(
        `model ${name} has a traffic split; clear it (batchserve traffic clear ${name}) before starting a canary`,
      );
    }
    const status = this.#canaries.start(name, settings);
    await this.#save();
    return status;
  }

  canaryStatus(name: string): CanaryStatus {
    return this.#canaries.status(name);
  }

  async rollback(name: string): Promise<CanaryStatus> {
    const status = this.#canaries.rollback(name);
    await this.#save();
    return status;
  }

  async promote(name: string): Promise<CanaryStatus> {
    const status = this.#canaries.promote(name);
    await this.#save();
    return status;
  }

  /** Every finished inference request, for the canaries' guardrails. */
  requestFinished(model: LoadedModel, status: number, seconds: number): void {
    this.#canaries.requestFinished(model, status, seconds);
  }

  /** Every feedback joined to a prediction of `model` (the version that answered), for the canaries' quality guardrail. */
  feedbackReceived(model: LoadedModel, quality: FeedbackQuality): void {
    this.#canaries.feedbackReceived(model, quality);
  }

  /**
   * Mirrors a request to the model's shadow version, if it has one (a canary guarded on
   * agreement imposes its candidate): the copy runs on its own, its answer is compared with the
   * served one and dropped. Returns a callback that takes the served answer once it is there.
   */
  mirror(
    served: LoadedModel,
    submit: (shadow: LoadedModel) => Promise<{ response: unknown }>,
  ): ((answer: unknown) => void) | undefined {
    const target = this.router.shadowFor(served);
    if (target === undefined) return undefined;
    const { metrics } = this.#options;
    const started = process.hrtime.bigint();
    const shadowAnswer = submit(target.model).then(
      (result) => ({ response: result.response, seconds: Number(process.hrtime.bigint() - started) / 1e9 }),
      () => undefined,
    );
    return (answer) => {
      void shadowAnswer.then((shadow) => {
        const result =
          shadow === undefined
            ? 'failed'
            : answersAgree(answer, shadow.response, target.tolerance)
              ? 'agree'
              : 'disagree';
        metrics.shadowCompared(served.name, target.model.version, result, shadow?.seconds ?? 0);
        this.#canaries.answersCompared(served, target.model, result);
      });
    };
  }

  close(): void {
    this.#canaries.close();
  }

  #save(): Promise<void> {
    const { repository } = this.#options;
    const state = new Map<string, ModelRouting>();
    for (const name of repository.names()) this.#known.add(name);
    for (const name of [...this.#known].sort()) {
      const defaultVersion = repository.runtimeDefault(name);
      const traffic = this.router.traffic(name);
      const canary = this.#canaries.recordOf(name);
      if (defaultVersion === undefined && traffic === undefined && canary === undefined) continue;
      state.set(name, {
        ...(defaultVersion !== undefined ? { default_version: defaultVersion } : {}),
        ...(traffic !== undefined ? { traffic } : {}),
        ...(canary !== undefined ? { canary } : {}),
      });
    }
    return this.#file.write(state).catch((error: unknown) => {
      this.#options.logger.error(
        { err: error, file: this.#file.path },
        'could not write the state file; the change holds until restart',
      );
    });
  }
}
