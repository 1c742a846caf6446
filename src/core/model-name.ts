import { InvalidModelNameError } from './errors.js';
import { quoted } from './quote.js';

// The one rule for model names (and versions and pipeline step names), TorchServe's and
// Triton's: a name becomes a URL path segment, a metric label and a folder name (work
// folders, prediction logs), so it may hold no separator, quote or control character, and
// may not start with a dot (no "..", no hidden folder). docs/archives.md#model-names.

/** Characters of a name: room for any real model, short enough for a folder and a label. */
export const MAX_MODEL_NAME_LENGTH = 128;
/** Letters, digits, `_ . -`, starting with a letter or digit, at most MAX_MODEL_NAME_LENGTH. */
export const MODEL_NAME_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,${MAX_MODEL_NAME_LENGTH - 1}}$`);
export const MODEL_NAME_HINT = `a model name (letters, digits, _ . -, starting with a letter or digit, at most ${MAX_MODEL_NAME_LENGTH} characters)`;

/** Why `name` is not a model name, or undefined when it is one. */
export function modelNameProblem(name: string): string | undefined {
  if (name.length > MAX_MODEL_NAME_LENGTH) return `is ${name.length} characters long, over ${MAX_MODEL_NAME_LENGTH}`;
  if (!MODEL_NAME_PATTERN.test(name)) {
    return "is not letters, digits, '_', '.', '-', starting with a letter or digit";
  }
  return undefined;
}

/** `name` when it is a model name; InvalidModelNameError naming `what` otherwise. */
export function checkModelName(name: string, what = 'model name'): string {
  const problem = modelNameProblem(name);
  if (problem !== undefined) throw new InvalidModelNameError(`${what} ${quoted(name)} ${problem}`);
  return name;
}
