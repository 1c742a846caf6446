import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type * as XGrammar from '@mlc-ai/web-xgrammar';
import { InferenceInputError } from '../core/errors.js';

/** OpenAI's response_format, checked: free text, any JSON object, or JSON that matches a schema. */
export type ResponseFormat =
  | { readonly type: 'json_object' }
  | { readonly type: 'json_schema'; readonly schema: Readonly<Record<string, unknown>> };

/** Grammars kept compiled, by format: a service's few schemas compile once. */
const COMPILED_KEPT = 64;

let library: typeof XGrammar | undefined;

/**
 * xgrammar, the grammar engine vLLM and SGLang mask tokens with, compiled to WebAssembly. The
 * package ships a browser bundle (UMD) under "type": "module", where Node's ESM loader gives
 * it no `require`: it is run as the CommonJS script it also is.
 */
function xgrammar(): typeof XGrammar {
  if (library) return library;
  const require = createRequire(import.meta.url);
  const file = require.resolve('@mlc-ai/web-xgrammar');
  const module = { exports: {} as typeof XGrammar };
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- the package's own bundle, run once
  const run = new Function('exports', 'module', 'require', '__filename', '__dirname', readFileSync(file, 'utf8')) as (
    ...args: unknown[]
  ) => void;
  run(module.exports, module, createRequire(file), file, dirname(file));
  library = module.exports;
  return library;
}

interface TokenizerJson {
  readonly model?: { type?: string; vocab?: Record<string, number> | [string, number][]; byte_fallback?: boolean };
  readonly added_tokens?: readonly { id: number; content: string }[];
  readonly decoder?: { type?: string; decoders?: readonly { type?: string }[] } | null;
  readonly normalizer?: { type?: string; normalizers?: readonly { type?: string; prepend?: string }[] } | null;
  readonly pre_tokenizer?: { type?: string; prepend_scheme?: string } | null;
}

/** How xgrammar reads a tokenizer's pieces as text: whether it can at all. */
function vocabularyOf(
  tokenizer: TokenizerJson,
  vocabSize: number,
): { encoded: string[]; type: 'byte_level' | 'byte_fallback' | 'raw'; prependSpace: boolean } {
  const decoders = [tokenizer.decoder?.type, ...(tokenizer.decoder?.decoders ?? []).map((each) => each.type)];
  const model = tokenizer.model ?? {};
  const type = decoders.includes('ByteLevel')
    ? 'byte_level'
    : model.byte_fallback || decoders.includes('ByteFallback')
      ? 'byte_fallback'
      : model.type === 'BPE' || model.type === 'Unigram'
        ? 'raw'
        : undefined;
  if (!type || decoders.includes('WordPiece')) {
    throw new InferenceInputError(
      `"response_format" needs a tokenizer whose tokens are pieces of text (byte-level BPE, or SentencePiece with byte fallback); this model's is ${model.type ?? 'of no known model'}${tokenizer.decoder?.type ? ` with a ${tokenizer.decoder.type} decoder` : ''}`,
    );
  }
  const encoded = new Array<string>(vocabSize).fill('');
  const pieces = Array.isArray(model.vocab)
    ? model.vocab.map(([piece], id) => [piece, id] as const)
    : Object.entries(model.vocab ?? {});
  for (const [piece, id] of pieces) if (id < vocabSize) encoded[id] = piece;
  for (const { id, content } of tokenizer.added_tokens ?? []) if (id < vocabSize) encoded[id] = content;
  const prepends =
    tokenizer.normalizer?.normalizers?.some((each) => each.type === 'Prepend' && each.prepend === '▁') ||
    tokenizer.normalizer?.type === 'Prepend' ||
    (tokenizer.pre_tokenizer?.type === 'Metaspace' && tokenizer.pre_tokenizer.prepend_scheme !== 'never');
  return { encoded, type, prependSpace: Boolean(prepends) };
}

/** The tokenizer's ids: one more than the largest. */
function idsOf(tokenizer: TokenizerJson): number {
  const vocab = tokenizer.model?.vocab ?? {};
  const ids = Array.isArray(vocab) ? [vocab.length - 1] : Object.values(vocab);
  return Math.max(...ids, ...(tokenizer.added_tokens ?? []).map((token) => token.id)) + 1;
}

/** One sequence's grammar state: which tokens may come next, and whether the text is complete. */
export interface GrammarState {
  /** Sets the logits of every token the grammar does not allow next to −∞, in place. */
  mask(logits: Float32Array): Promise<void>;
  /** Takes the token drawn; true once the text is complete. */
  accept(token: number): boolean;
  dispose(): void;
}

/**
 * The grammars of one decoder's tokenizer: response formats compiled once and kept, and a
 * state for each sequence that asks for one (xgrammar's GrammarMatcher), which masks the
 * logits before every token is drawn so the answer always parses and validates, whatever the
 * weights say.
 */
export class Grammars {
  #compilerLoad: Promise<XGrammar.GrammarCompiler> | undefined;
  readonly #compiled = new Map<string, Promise<XGrammar.CompiledGrammar>>();

  #vocabSize: number | undefined;

  constructor(
    private readonly tokenizerJson: string,
    /** The logits' width; undefined: the tokenizer's ids, read when first needed. */
    vocabSize: number | undefined,
    /** The model's end tokens: allowed once the text is complete. With none, completing ends the answer. */
    private readonly stopTokens: readonly number[],
  ) {
    this.#vocabSize = vocabSize;
  }

  async state(format: ResponseFormat): Promise<GrammarState> {
    const xg = xgrammar();
    const compiled = await this.#compile(format);
    const matcher = await xg.GrammarMatcher.createGrammarMatcher(
      compiled,
      this.stopTokens.length > 0 ? [...this.stopTokens] : undefined,
      this.stopTokens.length === 0,
    );
    const words = Math.ceil(this.#vocab() / 32);
    return {
      async mask(logits) {
        const allowed = await matcher.getNextTokenBitmask();
        for (let word = 0; word < words; word++) {
          const bits = allowed[word] as number;
          if (bits === -1) continue;
          for (let bit = 0; bit < 32; bit++) {
            const id = word * 32 + bit;
            if (id < logits.length && ((bits >>> bit) & 1) === 0) logits[id] = -Infinity;
          }
        }
      },
      accept(token) {
        if (!matcher.acceptToken(token)) {
          throw new Error(`the grammar refused token ${token}, which its own mask allowed`);
        }
        return matcher.isTerminated();
      },
      dispose: () => matcher.dispose(),
    };
  }

  #vocab(): number {
    this.#vocabSize ??= idsOf(JSON.parse(this.tokenizerJson) as TokenizerJson);
    return this.#vocabSize;
  }

  #compile(format: ResponseFormat): Promise<XGrammar.CompiledGrammar> {
    const key = JSON.stringify(format);
    let compiled = this.#compiled.get(key);
    if (!compiled) {
      compiled = this.#compiler().then(async (compiler) => {
        try {
          // One line, no spaces: whitespace the grammar allowed anywhere is what a model with
          // nothing to say loops on until max_tokens, and an answer cut there does not parse.
          const schema = format.type === 'json_object' ? { type: 'object' } : format.schema;
          return await compiler.compileJSONSchema(JSON.stringify(schema), false, -1, [',', ':']);
        } catch (error) {
          throw new InferenceInputError(
            `"response_format": the schema cannot be made a grammar: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      });
      // A schema that fails is not kept: the next request names it again and hears why.
      compiled.catch(() => this.#compiled.delete(key));
      this.#compiled.set(key, compiled);
      if (this.#compiled.size > COMPILED_KEPT) this.#compiled.delete(this.#compiled.keys().next().value as string);
    }
    return compiled;
  }

  #compiler(): Promise<XGrammar.GrammarCompiler> {
    this.#compilerLoad ??= (async () => {
      const xg = xgrammar();
      const vocabSize = this.#vocab();
      const { encoded, type, prependSpace } = vocabularyOf(JSON.parse(this.tokenizerJson) as TokenizerJson, vocabSize);
      const info = await xg.TokenizerInfo.createTokenizerInfo(encoded, type, prependSpace, vocabSize, [
        ...this.stopTokens,
      ]);
      return xg.GrammarCompiler.createGrammarCompiler(info);
    })();
    // A tokenizer xgrammar cannot read is refused again, with its reason, at each request.
    this.#compilerLoad.catch(() => (this.#compilerLoad = undefined));
    return this.#compilerLoad;
  }
}

/** The schema keywords xgrammar turns into grammar (annotations, which constrain nothing, included). */
const SERVED_KEYWORDS = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  '$ref',
  '$defs',
  'definitions',
  'minLength',
  'maxLength',
  'pattern',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'title',
  'description',
  'default',
  'examples',
  '$schema',
  '$id',
  '$comment',
]);

/** Keywords whose value is a map of names to schemas, or a list of schemas: walked into. */
const SCHEMA_MAPS = new Set(['properties', '$defs', 'definitions']);
const SCHEMA_LISTS = new Set(['anyOf', 'oneOf', 'prefixItems']);

/**
 * The first keyword of a JSON schema that xgrammar would not enforce, and where: such a schema
 * is refused rather than answered by a grammar that lets through what it forbids.
 */
export function unservedKeyword(
  schema: Readonly<Record<string, unknown>>,
  path = '#',
): { keyword: string; path: string } | undefined {
  for (const [keyword, value] of Object.entries(schema)) {
    if (!SERVED_KEYWORDS.has(keyword)) return { keyword, path };
    const children: [string, unknown][] = SCHEMA_MAPS.has(keyword)
      ? Object.entries((value ?? {}) as Record<string, unknown>).map(([name, child]) => [`${keyword}/${name}`, child])
      : SCHEMA_LISTS.has(keyword) && Array.isArray(value)
        ? value.map((child, index) => [`${keyword}/${index}`, child])
        : keyword === 'items' || keyword === 'additionalProperties'
          ? [[keyword, value]]
          : [];
    for (const [where, child] of children) {
      if (typeof child !== 'object' || child === null || Array.isArray(child)) continue;
      const found = unservedKeyword(child as Record<string, unknown>, `${path}/${where}`);
      if (found) return found;
    }
  }
  return undefined;
}
