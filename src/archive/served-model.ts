import { optimizedGraphRefusal } from '../runtime/optimized-graph.js';
import type { ArchiveManifest } from './manifest.js';

export interface ServedModelFile {
  /** The archive file an instance on this device loads. */
  readonly file: string;
  /** When an optimised graph exists but is not used here: one line saying which file and why. */
  readonly fallback?: string;
}

/**
 * Which of an archive's model files an instance on `device` loads: the optimised graph from
 * `pack --optimize` when this onnxruntime saved it and the device may run it, else the
 * serialized file (the converted model for `--precision` archives), which always works.
 */
export function servedModelFile(manifest: ArchiveManifest, device: string): ServedModelFile {
  const { serializedFile, optimizedFile, optimization } = manifest.model;
  if (optimizedFile === undefined || optimization === undefined) return { file: serializedFile };
  const refusal = optimizedGraphRefusal(device, optimization.onnxruntimeVersion);
  if (refusal === undefined) return { file: optimizedFile };
  return { file: serializedFile, fallback: `serving ${serializedFile} instead of ${optimizedFile}: ${refusal}` };
}
