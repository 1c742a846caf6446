import { stat } from 'node:fs/promises';
import { extname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { HandlerInvalidError } from '../core/errors.js';
import { imageClassifierHandler } from './image-classifier-handler.js';
import { tensorHandler } from './tensor-handler.js';
import { textClassifierHandler } from './text-classifier-handler.js';
import { textEmbeddingHandler } from './text-embedding-handler.js';
import { textGenerationHandler } from './text-generation-handler.js';
import { HANDLER_HOOKS, type BuiltinHandlerName, type Handler } from './types.js';

export const BUILTIN_HANDLERS: Readonly<Record<BuiltinHandlerName, Handler>> = {
  tensor: tensorHandler,
  'image-classifier': imageClassifierHandler,
  'text-embedding': textEmbeddingHandler,
  'text-classifier': textClassifierHandler,
  'text-generation': textGenerationHandler,
};

export const HANDLER_EXTENSIONS = ['.js', '.mjs', '.ts', '.mts'] as const;

export function isBuiltinHandler(name: string): name is BuiltinHandlerName {
  return Object.hasOwn(BUILTIN_HANDLERS, name);
}

/**
 * A built-in handler by name, or a handler module imported from a file (TypeScript is
 * compiled on import). The module may export only the lifecycle hooks, each a function;
 * hooks it leaves out come from the built-in tensor handler.
 */
export async function loadHandler(nameOrFile: string): Promise<Handler> {
  if (isBuiltinHandler(nameOrFile)) return BUILTIN_HANDLERS[nameOrFile];
  const extension = extname(nameOrFile).toLowerCase();
  if (!(HANDLER_EXTENSIONS as readonly string[]).includes(extension)) {
    throw new HandlerInvalidError(
      `handler ${nameOrFile}: expected a built-in (${Object.keys(BUILTIN_HANDLERS).join(', ')}) or a ${HANDLER_EXTENSIONS.join('/')} file`,
    );
  }
  if (!(await stat(nameOrFile).catch(() => undefined))?.isFile()) {
    throw new HandlerInvalidError(`handler file ${nameOrFile} does not exist`);
  }
  const module = await importHandlerModule(nameOrFile, extension);
  return { ...tensorHandler, ...checkHooks(module, nameOrFile) };
}

export async function importHandlerModule(file: string, extension: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(file).href;
  try {
    if (extension === '.ts' || extension === '.mts') {
      const { tsImport } = await import('tsx/esm/api');
      return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
    }
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw new HandlerInvalidError(`handler ${file} cannot be imported: ${message}`, { cause: error });
  }
}

function checkHooks(module: Record<string, unknown>, file: string): Partial<Handler> {
  const known: readonly string[] = HANDLER_HOOKS;
  const problems: string[] = [];
  const hooks: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(module)) {
    if (name === '__esModule' || name === 'module.exports' || isCommonJsInterop(name, value, module)) continue;
    if (!known.includes(name)) {
      problems.push(`exports "${name}", which is not a hook (expected ${HANDLER_HOOKS.join(', ')})`);
    } else if (typeof value !== 'function') {
      problems.push(`exports "${name}" as ${typeof value}, expected a function`);
    } else {
      hooks[name] = value;
    }
  }
  if (problems.length > 0) throw new HandlerInvalidError(`handler ${file}: ${problems.join('; ')}`);
  if (Object.keys(hooks).length === 0) {
    throw new HandlerInvalidError(`handler ${file} exports none of ${HANDLER_HOOKS.join(', ')}`);
  }
  return hooks;
}

/**
 * A handler compiled as CommonJS (a .ts file outside an ESM package) also shows its
 * `module.exports` as `default`; that copy of the named exports is not an extra export.
 */
function isCommonJsInterop(name: string, value: unknown, module: Record<string, unknown>): boolean {
  return (
    name === 'default' &&
    typeof value === 'object' &&
    value !== null &&
    Object.entries(value).every(([key, hook]) => module[key] === hook)
  );
}
