import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { Document, isSeq, parse as parseYaml, visit, YAMLError } from 'yaml';
import { ConfigInvalidError, InputFileError } from '../core/errors.js';
import { validateModelConfig, type ModelConfig } from './model-config.js';
import { formatDuration } from './schema-kit.js';

/**
 * Aliases one config may expand. A real config needs none or a few; the yaml package's own
 * default (100) still lets a nested bomb build a large document before it notices.
 */
const MAX_YAML_ALIASES = 50;

/** Parses YAML (or JSON, a subset of it) text; syntax errors name the source and line. */
export function parseConfigText(text: string, source: string): unknown {
  if (extname(source).toLowerCase() === '.json') {
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      throw new ConfigInvalidError(source, [`not valid JSON: ${(error as Error).message}`]);
    }
  }
  try {
    return parseYaml(text, { uniqueKeys: true, prettyErrors: true, maxAliasCount: MAX_YAML_ALIASES }) as unknown;
  } catch (error) {
    if (error instanceof YAMLError) {
      const line = error.linePos?.[0].line;
      const where = line === undefined ? '' : `line ${line}: `;
      throw new ConfigInvalidError(source, [`${where}not valid YAML: ${error.message.split('\n')[0] ?? ''}`]);
    }
    // The yaml package refuses an alias bomb ("billion laughs") with a plain ReferenceError.
    if (error instanceof ReferenceError) {
      throw new ConfigInvalidError(source, [`not valid YAML: ${error.message}`]);
    }
    throw error;
  }
}

export function modelConfigFromText(text: string, source: string): ModelConfig {
  return validateModelConfig(parseConfigText(text, source), source);
}

export async function readModelConfigFile(path: string): Promise<ModelConfig> {
  return validateModelConfig(await readConfigFile(path), path);
}

/** A YAML or JSON config file, parsed but not yet validated. */
export async function readConfigFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new InputFileError(
      `cannot read config file ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
  return parseConfigText(text, path);
}

/**
 * The YAML an archive stores and inspect shows: durations as readable strings, and lists of
 * plain values (shapes, means) on one line.
 */
export function modelConfigToYaml(config: ModelConfig): string {
  const { dynamic_batching: batching } = config;
  const document = new Document({
    ...config,
    dynamic_batching: {
      ...batching,
      max_queue_delay: batching.max_queue_delay === 'auto' ? 'auto' : yamlDuration(batching.max_queue_delay),
      ...(batching.max_latency !== undefined ? { max_latency: yamlDuration(batching.max_latency) } : {}),
      default_timeout: yamlDuration(batching.default_timeout),
    },
    handler_load_timeout: yamlDuration(config.handler_load_timeout),
  });
  visit(document, {
    Seq(_, seq) {
      if (seq.items.every((item) => !isSeq(item) && !(typeof item === 'object' && item !== null && 'items' in item))) {
        seq.flow = true;
      }
    },
  });
  return document.toString();
}

/** 0 stays a plain number in YAML; other durations read better with a unit. */
function yamlDuration(micros: number): string | number {
  return micros === 0 ? 0 : formatDuration(micros);
}
