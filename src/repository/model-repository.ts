import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ModelConflictError, ModelNotFoundError } from '../errors.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import { loadModelArchive } from './load-archive.js';
import type { LoadedModel } from './loaded-model.js';

export interface RepositoryOptions {
  readonly workRoot: string;
  readonly metrics: ServerMetrics;
  /** Folder of archives that `--models all`, the repository index and register-by-name use. */
  readonly modelStore?: string;
  /** Overrides every model's device. */
  readonly device?: string;
}

export interface RepositoryIndexEntry {
  readonly name: string;
  readonly version?: string;
  readonly state: 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';
  readonly reason?: string;
}

/** Versions compare as numbers where they are numbers: 10 comes after 9. */
const compareVersions = (a: string, b: string): number => a.localeCompare(b, 'en', { numeric: true });

/** The loaded models by name and version, and which version answers when none is named. */
export class ModelRepository {
  private readonly models = new Map<string, Map<string, LoadedModel>>();
  private readonly defaults = new Map<string, string>();
  private readonly loading = new Set<string>();
  private readonly failures = new Map<string, string>();

  constructor(private readonly options: RepositoryOptions) {}

  get modelStore(): string | undefined {
    return this.options.modelStore;
  }

  async load(archivePath: string, overrides: { version?: string; device?: string } = {}): Promise<LoadedModel> {
    const key = resolve(archivePath);
    this.loading.add(key);
    try {
      const device = overrides.device ?? this.options.device;
      const model = await loadModelArchive(archivePath, {
        workRoot: this.options.workRoot,
        metrics: this.options.metrics,
        ...(device ? { device } : {}),
        ...(overrides.version ? { version: overrides.version } : {}),
      });
      const versions = this.models.get(model.name) ?? new Map<string, LoadedModel>();
      if (versions.has(model.version)) {
        await model.unload();
        throw new ModelConflictError(`model ${model.name} version ${model.version} is already loaded`);
      }
      versions.set(model.version, model);
      this.models.set(model.name, versions);
      this.failures.delete(model.name);
      return model;
    } catch (error) {
      this.failures.set(key, error instanceof Error ? error.message : String(error));
      throw error;
    } finally {
      this.loading.delete(key);
    }
  }

  /** The archive in the model store for a model name: `<name>.mar` or a `<name>/` folder. */
  async storeArchive(name: string): Promise<string> {
    const store = this.options.modelStore;
    if (store) {
      for (const candidate of [join(store, `${name}.mar`), join(store, name)]) {
        if (await stat(candidate).catch(() => undefined)) return candidate;
      }
    }
    throw new ModelNotFoundError(
      store
        ? `no archive for model "${name}" in the model store ${store}`
        : 'the server has no model store (--model-store)',
    );
  }

  /** Every archive in the model store: `.mar` files and archive folders. */
  async storeArchives(): Promise<string[]> {
    const store = this.options.modelStore;
    if (!store) return [];
    const entries = await readdir(store, { withFileTypes: true });
    const archives: string[] = [];
    for (const entry of entries) {
      if (entry.isFile() && entry.name.endsWith('.mar')) archives.push(join(store, entry.name));
      if (entry.isDirectory() && (await stat(join(store, entry.name, 'MAR-INF')).catch(() => undefined))) {
        archives.push(join(store, entry.name));
      }
    }
    return archives.sort();
  }

  /** A loaded version, or the default one when `version` is undefined. */
  get(name: string, version?: string): LoadedModel {
    const versions = this.models.get(name);
    if (!versions || versions.size === 0) throw new ModelNotFoundError(`unknown model "${name}"`);
    const chosen = version ?? this.defaultVersion(name);
    const model = chosen === undefined ? undefined : versions.get(chosen);
    if (!model) {
      throw new ModelNotFoundError(
        `model "${name}" has no version "${String(version)}" (loaded: ${[...versions.keys()].join(', ')})`,
      );
    }
    return model;
  }

  has(name: string): boolean {
    return (this.models.get(name)?.size ?? 0) > 0;
  }

  versions(name: string): LoadedModel[] {
    return [...(this.models.get(name)?.values() ?? [])].sort((a, b) => compareVersions(a.version, b.version));
  }

  list(): LoadedModel[] {
    return [...this.models.keys()].sort().flatMap((name) => this.versions(name));
  }

  names(): string[] {
    return [...this.models.keys()].filter((name) => this.has(name)).sort();
  }

  defaultVersion(name: string): string | undefined {
    const chosen = this.defaults.get(name);
    if (chosen !== undefined && this.models.get(name)?.has(chosen)) return chosen;
    return this.versions(name).at(-1)?.version;
  }

  setDefault(name: string, version: string): void {
    this.get(name, version);
    this.defaults.set(name, version);
  }

  /** Drains and unloads one version, or every version of the model. */
  async unload(name: string, version?: string): Promise<LoadedModel[]> {
    const targets = version === undefined ? this.versions(name) : [this.get(name, version)];
    if (targets.length === 0) throw new ModelNotFoundError(`unknown model "${name}"`);
    await Promise.all(targets.map((model) => model.unload()));
    const versions = this.models.get(name);
    for (const model of targets) versions?.delete(model.version);
    if (versions?.size === 0) {
      this.models.delete(name);
      this.defaults.delete(name);
    }
    return targets;
  }

  async unloadAll(): Promise<void> {
    await Promise.all(this.names().map((name) => this.unload(name)));
  }

  /** Ready when every loaded model version is. */
  allReady(): boolean {
    return this.loading.size === 0 && this.list().every((model) => model.state === 'ready');
  }

  /** Triton's repository index: the store's archives and every loaded version, with their state. */
  async index(): Promise<RepositoryIndexEntry[]> {
    const entries: RepositoryIndexEntry[] = this.list().map((model) => ({
      name: model.name,
      version: model.version,
      state: model.state === 'ready' ? 'READY' : 'UNLOADING',
    }));
    const loadedArchives = new Set(this.list().map((model) => resolve(model.archivePath)));
    for (const archive of await this.storeArchives()) {
      if (loadedArchives.has(resolve(archive))) continue;
      const name = archive.slice(archive.lastIndexOf('/') + 1).replace(/\.mar$/, '');
      const failure = this.failures.get(resolve(archive));
      entries.push({
        name,
        state: this.loading.has(resolve(archive)) ? 'LOADING' : 'UNAVAILABLE',
        ...(failure ? { reason: failure } : {}),
      });
    }
    return entries.sort((a, b) => a.name.localeCompare(b.name));
  }
}
