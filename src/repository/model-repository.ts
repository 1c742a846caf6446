import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { BatchserveError } from '../core/errors.js';
import {
  ModelConflictError,
  ModelInUseError,
  ModelNotFoundError,
  PipelineInvalidError,
  VersionPolicyError,
} from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { isModelStep } from '../config/pipeline-config.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { ModelPolicy, VersionPolicy } from '../config/model-policy.js';
import { loadModelArchive } from './load-archive.js';
import type { LoadedModel } from './loaded-model.js';
import { readArchiveIdentity, readStoreCatalog, type ArchiveIdentity, type StoreCatalog } from './store-catalog.js';
import { compareVersions, describeVersionPolicy, selectVersions } from './version-policy.js';
import { readTritonRepository } from './triton-repository.js';

export interface RepositoryOptions {
  readonly workRoot: string;
  readonly metrics: ServerMetrics;
  readonly logger?: Logger;
  /**
   * Folder of archives (or one archive) that `--models all`, the repository index and
   * register-by-name read. Never written, but by a register-by-URL download into a writable folder.
   */
  readonly modelStore?: string;
  /** `serve --model-name`: the store's archives are offered, and loaded, under this name. */
  readonly storeModelName?: string;
  /** Overrides every model's device. */
  readonly device?: string;
  /** Per model name; its `version_policy` decides which versions may be loaded. */
  readonly policies?: Readonly<Record<string, ModelPolicy>>;
  /**
   * A Triton model repository (`serve --model-repository`), offered in place of a model store:
   * its models' version folders, under each config.pbtxt's version policy.
   */
  readonly tritonRepository?: string;
}

/** What one poll of a Triton repository changed. */
export interface TritonPollReport {
  readonly loaded: { name: string; version: string }[];
  readonly unloaded: { name: string; version: string }[];
  readonly failed: { name: string; message: string }[];
}

export interface RepositoryIndexEntry {
  readonly name: string;
  readonly version?: string;
  readonly state: 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';
  readonly reason?: string;
}

/** The loaded models by name and version, and which version answers when none is named. */
export class ModelRepository {
  readonly #models = new Map<string, Map<string, LoadedModel>>();
  /** Run-time choices (set-default, a canary's verdict, saved state): what the state file keeps. */
  readonly #defaults = new Map<string, string>();
  /** server.yaml's `default_version`s: they hold whenever that version is loaded, whatever unloads. */
  readonly #configuredDefaults = new Map<string, string>();
  readonly #loading = new Set<string>();
  readonly #failures = new Map<string, string>();
  /** Each Triton model's version_policy, as its config.pbtxt said at the last read. */
  readonly #tritonPolicies = new Map<string, VersionPolicy>();
  /** By version folder: what its config and model file were when it loaded (a change reloads it). */
  readonly #fingerprints = new Map<string, string>();
  readonly #options: RepositoryOptions;

  constructor(options: RepositoryOptions) {
    this.#options = options;
  }

  get modelStore(): string | undefined {
    return this.#options.modelStore;
  }

  get tritonRepository(): string | undefined {
    return this.#options.tritonRepository;
  }

  /** server.yaml's policy for the model, else its config.pbtxt's (Triton repository), else none (all). */
  versionPolicy(name: string): VersionPolicy | undefined {
    return this.#options.policies?.[name]?.version_policy ?? this.#tritonPolicies.get(name);
  }

  /**
   * Loads an archive as a new version of its model, logged at info (at start, by the
   * management API, a v2 repository load or a poll alike; unloads too). The manifest is read first, so a version
   * the policy refuses or one already loaded costs no extraction. Under `latest: N`, versions
   * that fall out of the N highest are drained and unloaded before this resolves.
   * `keepDefault` (loads while serving): the model's current default stays the default, so a
   * new version takes traffic only when told to, never by merely being loaded. `name` serves
   * the archive under another model name (`serve --model-name`).
   */
  async load(
    archivePath: string,
    overrides: { version?: string; name?: string; device?: string; keepDefault?: boolean } = {},
  ): Promise<LoadedModel> {
    const key = resolve(archivePath);
    this.#loading.add(key);
    try {
      const identity = await readArchiveIdentity(archivePath);
      this.#admit(overrides.name ?? identity.name, overrides.version ?? identity.version);
      const device = overrides.device ?? this.#options.device;
      const model = await loadModelArchive(archivePath, {
        workRoot: this.#options.workRoot,
        metrics: this.#options.metrics,
        ...(this.#options.logger ? { logger: this.#options.logger } : {}),
        ...(device ? { device } : {}),
        ...(overrides.version ? { version: overrides.version } : {}),
        ...(overrides.name ? { name: overrides.name } : {}),
        lookup: (name, version) => this.get(name, version),
      });
      const versions = this.#models.get(model.name) ?? new Map<string, LoadedModel>();
      if (versions.has(model.version)) {
        await model.unload();
        throw new ModelConflictError(`model ${model.name} version ${model.version} is already loaded`);
      }
      const current = this.defaultVersion(model.name);
      // The configured default holds on its own; any other default is pinned as a run-time choice.
      if (overrides.keepDefault && current !== undefined && current !== this.#configuredDefaults.get(model.name)) {
        this.#defaults.set(model.name, current);
      }
      versions.set(model.version, model);
      this.#models.set(model.name, versions);
      await this.#applyLatest(model);
      if (overrides.keepDefault && current !== undefined && !versions.has(current)) {
        // The policy evicted the default: the newest of the versions that were serving takes
        // over, still not the one just loaded.
        const successor = this.versions(model.name).findLast((loaded) => loaded !== model);
        if (successor) this.#defaults.set(model.name, successor.version);
      }
      this.#failures.delete(key);
      if (identity.fingerprint !== undefined) this.#fingerprints.set(key, identity.fingerprint);
      this.#options.logger?.info(
        { model: model.name, version: model.version, seconds: model.loadSeconds, archive: archivePath },
        'model loaded',
      );
      return model;
    } catch (error) {
      // "Already loaded" says nothing of the archive, and would outlive the version it names.
      if (!(error instanceof ModelConflictError)) {
        this.#failures.set(key, error instanceof Error ? error.message : String(error));
      }
      throw error;
    } finally {
      this.#loading.delete(key);
    }
  }

  /** Refuses a version before it is loaded: already loaded, or not kept by the policy. */
  #admit(name: string, version: string): void {
    const loaded = [...(this.#models.get(name)?.keys() ?? [])];
    if (loaded.includes(version)) throw new ModelConflictError(`model ${name} version ${version} is already loaded`);
    const policy = this.versionPolicy(name);
    if (selectVersions(policy, [...loaded, version]).kept.includes(version)) return;
    const newer = policy?.latest === undefined ? '' : ` (loaded: ${loaded.sort(compareVersions).join(', ')})`;
    throw new VersionPolicyError(
      `model ${name} keeps versions (${describeVersionPolicy(policy)}); version ${version} is refused${newer}`,
    );
  }

  /** Drains and unloads what a `latest` policy no longer keeps, the new model too if loads raced. */
  async #applyLatest(model: LoadedModel): Promise<void> {
    const policy = this.versionPolicy(model.name);
    if (policy?.latest === undefined) return;
    const { excluded } = selectVersions(policy, this.#models.get(model.name)?.keys() ?? []);
    // The policy is the operator's explicit choice: it wins over a pipeline pinned to an evicted version.
    await Promise.all(excluded.map((version) => this.unload(model.name, version, { force: true })));
    if (excluded.includes(model.version)) {
      throw new VersionPolicyError(
        `model ${model.name} keeps versions (${describeVersionPolicy(policy)}); version ${model.version} is refused: newer versions loaded meanwhile`,
      );
    }
  }

  /**
   * The model store's archives by manifest (under `storeModelName` when set), or the Triton
   * repository's version folders (a model whose config cannot be served is unreadable, and
   * so offers none); empty without either.
   */
  async storeCatalog(): Promise<StoreCatalog> {
    if (this.#options.tritonRepository !== undefined) return this.#tritonCatalog(this.#options.tritonRepository);
    const store = this.#options.modelStore;
    if (!store) return { archives: [], unreadable: [] };
    const catalog = await readStoreCatalog(store);
    for (const { path, error } of catalog.unreadable) this.#failures.set(resolve(path), error.message);
    const name = this.#options.storeModelName;
    return name === undefined
      ? catalog
      : { ...catalog, archives: catalog.archives.map((archive) => ({ ...archive, name })) };
  }

  async #tritonCatalog(repository: string): Promise<StoreCatalog> {
    const folders = await readTritonRepository(repository);
    const archives: ArchiveIdentity[] = [];
    const unreadable: { path: string; error: BatchserveError }[] = [];
    for (const folder of folders) {
      if (folder.error) {
        unreadable.push({ path: folder.dir, error: folder.error });
        this.#failures.set(resolve(folder.dir), folder.error.message);
        continue;
      }
      this.#failures.delete(resolve(folder.dir));
      this.#tritonPolicies.set(folder.name, folder.versionPolicy);
      archives.push(...folder.versions);
    }
    archives.sort((a, b) => a.name.localeCompare(b.name) || compareVersions(a.version, b.version));
    return { archives, unreadable };
  }

  /**
   * Loads, lowest first, every version of a model that the store offers, the policy keeps and
   * is not loaded yet; from a Triton repository, also drains the versions whose folders went
   * or that the policy no longer keeps, and reloads those whose config or model file changed.
   * ModelNotFoundError when the store has none and none is loaded.
   */
  async loadFromStore(name: string): Promise<LoadedModel[]> {
    const catalog = await this.storeCatalog();
    if (this.#options.tritonRepository !== undefined) return (await this.#syncTritonModel(name, catalog)).added;
    const offered = catalog.archives.filter((archive) => archive.name === name);
    if (offered.length === 0) {
      if (this.has(name)) return [];
      const store = this.#options.modelStore;
      throw new ModelNotFoundError(
        store
          ? `no archive of model ${quoted(name)} in the model store ${store}`
          : 'the server has no model store (--model-store)',
      );
    }
    const serving = this.has(name);
    const { kept } = this.selectOffered(name, offered);
    const added: LoadedModel[] = [];
    for (const archive of kept.sort((a, b) => compareVersions(a.version, b.version))) {
      // One archive per version: a second with the same version would only conflict.
      if (added.some((model) => model.version === archive.version)) continue;
      added.push(await this.load(archive.path, { keepDefault: serving, ...this.#storeName() }));
    }
    return added;
  }

  /**
   * Makes the loaded versions of a Triton model what its folder holds now, as Triton's poll
   * does: versions gone, or no longer kept by the policy, are drained and unloaded; changed
   * ones reloaded; new ones the policy keeps loaded (each of them serving at once: the highest
   * ready version answers requests that name none). A model whose folder went, or whose
   * config can no longer be served, is unloaded whole; with an unreadable config that is the
   * error thrown.
   */
  async #syncTritonModel(name: string, catalog: StoreCatalog): Promise<{ added: LoadedModel[]; removed: string[] }> {
    const offered = catalog.archives.filter((archive) => archive.name === name);
    const broken = catalog.unreadable.find(({ path }) => path.slice(path.lastIndexOf('/') + 1) === name);
    const removed: string[] = [];
    // The folder is the truth, as in Triton: a pipeline using a version that went fails its
    // requests to that step until the version is back (a changed one is back at once).
    const drain = async (version: string): Promise<void> => {
      await this.unload(name, version, { force: true });
      removed.push(version);
    };
    if (broken || offered.length === 0) {
      for (const model of this.versions(name)) await drain(model.version);
      if (broken) throw broken.error;
      if (removed.length > 0) return { added: [], removed };
      throw new ModelNotFoundError(
        `no model ${quoted(name)} in the model repository ${this.#options.tritonRepository ?? ''}`,
      );
    }
    const byVersion = new Map(offered.map((version) => [version.version, version]));
    const { kept } = selectVersions(this.versionPolicy(name), byVersion.keys());
    for (const model of this.versions(name)) {
      const now = byVersion.get(model.version);
      const changed = now !== undefined && this.#fingerprints.get(resolve(now.path)) !== now.fingerprint;
      if (now === undefined || !kept.includes(model.version) || changed) await drain(model.version);
    }
    const added: LoadedModel[] = [];
    for (const version of kept) {
      if (this.peek(name, version)) continue;
      added.push(await this.load((byVersion.get(version) as ArchiveIdentity).path));
    }
    return { added, removed };
  }

  /**
   * Triton's poll: every model of the repository made what its folder holds now, and models
   * whose folders went unloaded. An ensemble whose step models are not loaded yet is tried
   * again while others load; one model's failure is reported and the others go on.
   */
  async pollTritonRepository(): Promise<TritonPollReport> {
    const catalog = await this.storeCatalog();
    const report: TritonPollReport = { loaded: [], unloaded: [], failed: [] };
    let pending = [
      ...new Set([
        ...catalog.archives.map((archive) => archive.name),
        ...catalog.unreadable.map(({ path }) => path.slice(path.lastIndexOf('/') + 1)),
        ...this.list()
          .filter((model) => model.triton !== undefined)
          .map((model) => model.name),
      ]),
    ].sort();
    while (pending.length > 0) {
      const waiting: { name: string; error: unknown }[] = [];
      for (const name of pending) {
        const serving = this.has(name);
        try {
          const { added, removed } = await this.#syncTritonModel(name, catalog);
          report.loaded.push(...added.map((model) => ({ name, version: model.version })));
          report.unloaded.push(...removed.map((version) => ({ name, version })));
        } catch (error) {
          if (error instanceof ModelNotFoundError && !this.has(name)) continue;
          // A refused config that served nothing stays in the index with its reason; said at start and at each load.
          if (!serving && catalog.unreadable.some(({ error: unreadable }) => unreadable === error)) continue;
          if (error instanceof PipelineInvalidError || error instanceof ModelInUseError) waiting.push({ name, error });
          else report.failed.push({ name, message: error instanceof Error ? error.message : String(error) });
        }
      }
      if (waiting.length === pending.length) {
        for (const { name, error } of waiting) report.failed.push({ name, message: (error as Error).message });
        break;
      }
      pending = waiting.map(({ name }) => name);
    }
    return report;
  }

  /** The name a store archive is loaded under: `storeModelName`, or the archive's own. */
  #storeName(): { name?: string } {
    const name = this.#options.storeModelName;
    return name === undefined ? {} : { name };
  }

  /** Loads an archive of the model store, under `storeModelName` when that is set. */
  loadStoreArchive(archivePath: string): Promise<LoadedModel> {
    return this.load(archivePath, this.#storeName());
  }

  /**
   * Which offered archives of a model its version policy keeps, counting the versions loaded
   * already (those are not offered again), and which it excludes; both in offered order.
   */
  selectOffered<T extends ArchiveIdentity>(name: string, offered: readonly T[]): { kept: T[]; excluded: T[] } {
    const loaded = new Set(this.#models.get(name)?.keys());
    const { kept } = selectVersions(this.versionPolicy(name), [
      ...loaded,
      ...offered.map((archive) => archive.version),
    ]);
    const keep = new Set(kept);
    return {
      kept: offered.filter((archive) => keep.has(archive.version) && !loaded.has(archive.version)),
      excluded: offered.filter((archive) => !keep.has(archive.version)),
    };
  }

  /** A loaded version, or the default one when `version` is undefined. */
  get(name: string, version?: string): LoadedModel {
    const versions = this.#models.get(name);
    if (!versions || versions.size === 0) throw new ModelNotFoundError(`unknown model ${quoted(name)}`);
    const chosen = version ?? this.defaultVersion(name);
    const model = chosen === undefined ? undefined : versions.get(chosen);
    if (!model) {
      throw new ModelNotFoundError(
        `model ${quoted(name)} has no version ${quoted(String(version))} (loaded: ${[...versions.keys()].join(', ')})`,
      );
    }
    return model;
  }

  has(name: string): boolean {
    return (this.#models.get(name)?.size ?? 0) > 0;
  }

  versions(name: string): LoadedModel[] {
    return [...(this.#models.get(name)?.values() ?? [])].sort((a, b) => compareVersions(a.version, b.version));
  }

  list(): LoadedModel[] {
    return [...this.#models.keys()].sort().flatMap((name) => this.versions(name));
  }

  names(): string[] {
    return [...this.#models.keys()].filter((name) => this.has(name)).sort();
  }

  /** A loaded version, or undefined; for routing, which must not throw on a version gone meanwhile. */
  peek(name: string, version: string): LoadedModel | undefined {
    return this.#models.get(name)?.get(version);
  }

  /**
   * The version that answers when none is named: the chosen default while it is ready, else
   * the first loaded of those ready (TorchServe's rule), so a version loaded beside a serving
   * one takes no traffic until set-default, a split or a canary gives it some, and requests
   * never land on a version that is draining away.
   */
  defaultVersion(name: string): string | undefined {
    const versions = this.#models.get(name);
    for (const chosen of [this.#defaults.get(name), this.#configuredDefaults.get(name)]) {
      if (chosen !== undefined && versions?.get(chosen)?.state === 'ready') return chosen;
    }
    // A Triton repository's model answers with its highest ready version, as Triton does.
    const triton = this.versions(name).filter((model) => model.triton !== undefined && model.state === 'ready');
    if (triton.length > 0) return triton.at(-1)?.version;
    // A Map iterates in insertion order: the order the versions loaded.
    const loaded = [...(versions?.values() ?? [])];
    return (loaded.find((model) => model.state === 'ready') ?? loaded[0])?.version;
  }

  /** The default chosen at run time or in server.yaml, whether or not it is loaded now. */
  chosenDefault(name: string): string | undefined {
    return this.#defaults.get(name) ?? this.#configuredDefaults.get(name);
  }

  /** The default chosen at run time (set-default, a canary, saved state): the state file's to keep. */
  runtimeDefault(name: string): string | undefined {
    return this.#defaults.get(name);
  }

  setDefault(name: string, version: string): void {
    this.get(name, version);
    this.#defaults.set(name, version);
  }

  /**
   * The run-time default from saved state (undefined: none); it applies whenever that version
   * is loaded, until it is unloaded.
   */
  chooseDefault(name: string, version: string | undefined): void {
    if (version === undefined) this.#defaults.delete(name);
    else this.#defaults.set(name, version);
  }

  /** server.yaml's default (undefined: none); it applies whenever that version is loaded. */
  configureDefault(name: string, version: string | undefined): void {
    if (version === undefined) this.#configuredDefaults.delete(name);
    else this.#configuredDefaults.set(name, version);
  }

  /**
   * Drains and unloads one version, or every version of the model. Refused (ModelInUseError)
   * while a loaded pipeline's step needs it, unless `force`: then that step's requests fail.
   */
  async unload(name: string, version?: string, options: { force?: boolean } = {}): Promise<LoadedModel[]> {
    const targets = version === undefined ? this.versions(name) : [this.get(name, version)];
    if (targets.length === 0) throw new ModelNotFoundError(`unknown model ${quoted(name)}`);
    const users = options.force ? [] : this.#pipelinesNeeding(name, targets);
    if (users.length > 0) {
      throw new ModelInUseError(
        `model ${name} ${targets.map((model) => `version ${model.version}`).join(', ')} is used by ${users.join(', ')}; unload those first or force it (?force=true)`,
      );
    }
    await Promise.all(targets.map((model) => model.unload()));
    const versions = this.#models.get(name);
    for (const model of targets) {
      versions?.delete(model.version);
      // A run-time default on a version taken away is gone with it; server.yaml's stays.
      if (this.#defaults.get(name) === model.version) this.#defaults.delete(name);
    }
    if (versions?.size === 0) this.#models.delete(name);
    for (const model of targets) this.#options.logger?.info({ model: name, version: model.version }, 'model unloaded');
    return targets;
  }

  async unloadAll(): Promise<void> {
    await Promise.all(this.names().map((name) => this.unload(name, undefined, { force: true })));
  }

  /**
   * The loaded pipelines (other than those unloading with it) whose steps would lose their
   * model if `targets` went: a step pinned to one of those versions, or an unpinned step
   * when no other ready version of the model would remain.
   */
  #pipelinesNeeding(name: string, targets: readonly LoadedModel[]): string[] {
    const leaving = new Set(targets);
    const remaining = this.versions(name).filter((model) => !leaving.has(model) && model.state === 'ready');
    const users: string[] = [];
    for (const pipeline of this.list()) {
      if (leaving.has(pipeline) || pipeline.state !== 'ready') continue;
      for (const step of pipeline.config.pipeline?.steps ?? []) {
        if (!isModelStep(step) || step.model !== name) continue;
        const needed =
          step.version === undefined ? remaining.length === 0 : targets.some((model) => model.version === step.version);
        if (needed) users.push(`pipeline ${pipeline.name} version ${pipeline.version} (step "${step.name}")`);
      }
    }
    return users;
  }

  /** Ready when a model version is loaded and every loaded one is ready: with none, there is nothing to route to. */
  allReady(): boolean {
    const loaded = this.list();
    return this.#loading.size === 0 && loaded.length > 0 && loaded.every((model) => model.state === 'ready');
  }

  /** Triton's repository index: every loaded version and the store's other archives, with their state. */
  async index(): Promise<RepositoryIndexEntry[]> {
    const loaded = this.list();
    const entries: RepositoryIndexEntry[] = loaded.map((model) => ({
      name: model.name,
      version: model.version,
      state: model.state === 'ready' ? 'READY' : 'UNLOADING',
    }));
    const loadedArchives = new Set(loaded.map((model) => resolve(model.archivePath)));
    const isLoaded = (name: string, version: string): boolean => this.#models.get(name)?.has(version) ?? false;
    const { archives, unreadable } = await this.storeCatalog();
    for (const { path, name, version } of archives) {
      if (loadedArchives.has(resolve(path)) || isLoaded(name, version)) continue;
      entries.push({ name, version, ...this.#storeState(path) });
    }
    for (const { path } of unreadable) {
      entries.push({ name: path.slice(path.lastIndexOf('/') + 1).replace(/\.mar$/, ''), ...this.#storeState(path) });
    }
    return entries.sort((a, b) => a.name.localeCompare(b.name) || compareVersions(a.version ?? '', b.version ?? ''));
  }

  #storeState(path: string): Pick<RepositoryIndexEntry, 'state' | 'reason'> {
    const failure = this.#failures.get(resolve(path));
    return {
      state: this.#loading.has(resolve(path)) ? 'LOADING' : 'UNAVAILABLE',
      ...(failure ? { reason: failure } : {}),
    };
  }
}
