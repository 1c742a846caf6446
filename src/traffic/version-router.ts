import type { IncomingMessage } from 'node:http';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import { compareVersions } from '../repository/version-policy.js';
import { stickyDraw, versionSeed } from './sticky-hash.js';
import type { TrafficPolicy } from '../config/model-policy.js';
import type { Routing } from '../experiment/log-records.js';

interface WeightedVersion {
  readonly version: string;
  readonly weight: number;
  /** `versionSeed(version)`, kept so a keyed pick hashes only the key. */
  readonly seed: number;
}

interface StickyKey {
  readonly from: 'header' | 'query';
  /** Lower-cased for headers. */
  readonly name: string;
}

/** One model's routing, prepared when it changes so that choosing costs no allocation. */
interface ModelRoute {
  /** In version order, so random picks lay the weights out the same way every time. */
  readonly split: readonly WeightedVersion[] | undefined;
  /** Whose split it is: the configured traffic policy's or a running canary's. */
  readonly splitBy: 'split' | 'canary';
  readonly sticky: StickyKey | undefined;
  readonly shadow: string | undefined;
  readonly shadowTolerance: number;
}

/** Where a sticky `header:` key is read: an HTTP request, or a gRPC call's metadata in its shape. */
export type StickyHeaders = Pick<IncomingMessage, 'headers'>;

/** How `route` chose, for the prediction log: filled in by the call, owned by the caller. */
export interface RouteChoice {
  routing: Routing;
  /** The sticky key's value when the split used one. */
  stickyKey: string | undefined;
}

export interface ShadowTarget {
  readonly model: LoadedModel;
  readonly tolerance: number;
}

/** The version a running canary mirrors requests to, and how close answers must be to agree. */
export interface CanaryShadow {
  readonly version: string;
  readonly tolerance: number;
}

/**
 * Picks the version that answers a request naming none: by the model's split (a canary's
 * split wins over the configured one), sticky on a key when one is set, else the default
 * version. Versions that are not ready (loading elsewhere, draining) are left out and their
 * weight goes to the others, so a swap never sends a request to a version on its way out.
 */
export class VersionRouter {
  readonly #traffic = new Map<string, TrafficPolicy>();
  readonly #canarySplits = new Map<string, Readonly<Record<string, number>>>();
  readonly #canaryShadows = new Map<string, CanaryShadow>();
  readonly #routes = new Map<string, ModelRoute>();
  readonly #repository: ModelRepository;
  readonly #random: () => number;

  /**
   * `random` places requests that carry no sticky key; injectable so a test can pin the
   * points it checks instead of trusting a statistical bound.
   */
  constructor(repository: ModelRepository, random: () => number = Math.random) {
    this.#repository = repository;
    this.#random = random;
  }

  traffic(name: string): TrafficPolicy | undefined {
    return this.#traffic.get(name);
  }

  setTraffic(name: string, traffic: TrafficPolicy | undefined): void {
    if (traffic === undefined) this.#traffic.delete(name);
    else this.#traffic.set(name, traffic);
    this.#prepare(name);
  }

  /** The split a running canary imposes; undefined hands the model back to its traffic policy. */
  setCanarySplit(name: string, split: Readonly<Record<string, number>> | undefined): void {
    if (split === undefined) this.#canarySplits.delete(name);
    else this.#canarySplits.set(name, split);
    this.#prepare(name);
  }

  /**
   * The shadow a running canary imposes, winning over the traffic policy's while it runs;
   * undefined gives the model's shadow back to its traffic policy.
   */
  setCanaryShadow(name: string, shadow: CanaryShadow | undefined): void {
    if (shadow === undefined) this.#canaryShadows.delete(name);
    else this.#canaryShadows.set(name, shadow);
    this.#prepare(name);
  }

  /** The split in force now: the canary's, else the configured one. */
  effectiveSplit(name: string): Readonly<Record<string, number>> | undefined {
    return this.#canarySplits.get(name) ?? this.#traffic.get(name)?.split;
  }

  /** The version that answers; `choice`, when given, learns how it was chosen. */
  route(name: string, req: StickyHeaders, url: URL, choice?: RouteChoice): LoadedModel {
    const route = this.#routes.get(name);
    const split = route?.split;
    if (split === undefined) return this.#byDefault(name, choice);
    const sticky = route?.sticky;
    const key = sticky === undefined ? undefined : stickyKeyOf(sticky, req, url);
    const model = key === undefined ? this.#pickAtRandom(name, split) : this.#pickForKey(name, split, key);
    if (model === undefined) return this.#byDefault(name, choice);
    if (choice) {
      choice.routing = (route as ModelRoute).splitBy;
      choice.stickyKey = key;
    }
    return model;
  }

  #byDefault(name: string, choice: RouteChoice | undefined): LoadedModel {
    if (choice) {
      choice.routing = 'default';
      choice.stickyKey = undefined;
    }
    return this.#repository.get(name);
  }

  /** Weighted rendezvous hashing over the ready versions (see `stickyDraw`). */
  #pickForKey(name: string, split: readonly WeightedVersion[], key: string): LoadedModel | undefined {
    let best: LoadedModel | undefined;
    let bestScore = Infinity;
    for (const entry of split) {
      if (entry.weight === 0) continue;
      const model = this.#ready(name, entry.version);
      if (model === undefined) continue;
      const score = -Math.log(stickyDraw(entry.seed, key)) / entry.weight;
      if (score < bestScore) {
        bestScore = score;
        best = model;
      }
    }
    return best;
  }

  /** A uniform point over the ready versions' weights, laid end to end. */
  #pickAtRandom(name: string, split: readonly WeightedVersion[]): LoadedModel | undefined {
    let total = 0;
    for (const entry of split) if (this.#ready(name, entry.version)) total += entry.weight;
    if (total === 0) return undefined;
    let point = this.#random() * total;
    let last: LoadedModel | undefined;
    for (const entry of split) {
      const model = this.#ready(name, entry.version);
      if (model === undefined || entry.weight === 0) continue;
      if (point < entry.weight) return model;
      point -= entry.weight;
      last = model;
    }
    // Rounding can leave the point a hair past the last weight.
    return last;
  }

  /** The version that should see a copy of a request `served` answers, if any. */
  shadowFor(served: LoadedModel): ShadowTarget | undefined {
    const route = this.#routes.get(served.name);
    if (route?.shadow === undefined || route.shadow === served.version) return undefined;
    const model = this.#ready(served.name, route.shadow);
    return model === undefined ? undefined : { model, tolerance: route.shadowTolerance };
  }

  #ready(name: string, version: string): LoadedModel | undefined {
    const model = this.#repository.peek(name, version);
    return model?.state === 'ready' ? model : undefined;
  }

  #prepare(name: string): void {
    const traffic = this.#traffic.get(name);
    const split = this.effectiveSplit(name);
    const canaryShadow = this.#canaryShadows.get(name);
    if (traffic === undefined && split === undefined && canaryShadow === undefined) {
      this.#routes.delete(name);
      return;
    }
    this.#routes.set(name, {
      splitBy: this.#canarySplits.has(name) ? 'canary' : 'split',
      split:
        split === undefined
          ? undefined
          : Object.entries(split)
              .map(([version, weight]) => ({ version, weight, seed: versionSeed(version) }))
              .sort((a, b) => compareVersions(a.version, b.version)),
      sticky: traffic?.sticky_key === undefined ? undefined : parseStickyKey(traffic.sticky_key),
      shadow: canaryShadow?.version ?? traffic?.shadow,
      shadowTolerance: canaryShadow?.tolerance ?? traffic?.shadow_tolerance ?? 0,
    });
  }
}

/** `header:X-User-Id` or `query:user`, validated by the traffic schema already. */
function parseStickyKey(spec: string): StickyKey {
  const at = spec.indexOf(':');
  const from = spec.slice(0, at) as StickyKey['from'];
  const name = spec.slice(at + 1);
  return { from, name: from === 'header' ? name.toLowerCase() : name };
}

function stickyKeyOf(sticky: StickyKey, req: StickyHeaders, url: URL): string | undefined {
  const value = sticky.from === 'header' ? req.headers[sticky.name] : url.searchParams.get(sticky.name);
  const key = Array.isArray(value) ? value[0] : value;
  return key === undefined || key === null || key === '' ? undefined : key;
}
