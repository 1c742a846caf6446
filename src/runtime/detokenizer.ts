import type { TextTokenizer } from '../handlers/text-tokens.js';

/** Prompt tokens decoded with the first new ones (vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET). */
const PROMPT_CONTEXT = 5;

/**
 * One sequence's new text, a token at a time, without decoding the whole answer again (vLLM's
 * and TGI's incremental detokenizer): the ids since the last read are decoded with the ones
 * before them, starting with the end of the prompt, and what grew is the new text. The context
 * keeps what decoding one id alone would lose: SentencePiece's leading space ("▁is" is " is"
 * after a word, "is" alone), a word piece's join. A token that adds nothing yet (a special one,
 * part of a character) waits for the next.
 */
export class IncrementalDetokenizer {
  readonly #ids: number[];
  #prefixOffset = 0;
  #readOffset: number;

  constructor(
    private readonly tokenizer: TextTokenizer,
    promptIds: readonly number[],
  ) {
    this.#ids = promptIds.slice(-PROMPT_CONTEXT);
    this.#readOffset = this.#ids.length;
  }

  /** The text `id` completes: '' while it is part of a character or decodes to nothing. */
  push(id: number): string {
    this.#ids.push(id);
    const grown = this.#grown();
    if (grown === '' || grown.endsWith('\ufffd')) return '';
    this.#prefixOffset = this.#readOffset;
    this.#readOffset = this.#ids.length;
    return grown;
  }

  /** What the ids not yet read add at the end, as decoding them whole gives it (a cut character as U+FFFD). */
  flush(): string {
    return this.#readOffset < this.#ids.length ? this.#grown() : '';
  }

  #grown(): string {
    const decode = (to: number): string =>
      to > this.#prefixOffset
        ? this.tokenizer.decode(this.#ids.slice(this.#prefixOffset, to), { skip_special_tokens: true })
        : '';
    const before = decode(this.#readOffset);
    const after = decode(this.#ids.length);
    return after.length > before.length ? after.slice(before.length) : '';
  }
}
