import { loadTokenizer } from '../handlers/text-tokens.js';

/**
 * What a text model's accuracy gate reads when its tokenizer is known: plain prose, so the ids
 * are the tokenizer's own, in the model's vocabulary and in the mix real text has.
 */
const GATE_TEXT = [
  'The river rose slowly through the night, and by morning the low fields near the old mill were under water.',
  'Farmers moved their animals to higher ground while the children watched from the bridge.',
  'In the afternoon the rain stopped, the sun came out, and the water began to fall again.',
  'Nobody could remember a flood like it, although the oldest people in the village said their parents had seen one.',
].join(' ');

/**
 * Token ids for the gate's input_ids: the tokenizer's ids of GATE_TEXT (no special tokens), or
 * without a tokenizer ids 1–9, which every vocabulary has.
 */
export function gateTokenIds(tokenizerJson: string | undefined): readonly number[] {
  if (tokenizerJson === undefined) return [1, 2, 3, 4, 5, 6, 7, 8, 9];
  const { tokenizer } = loadTokenizer(tokenizerJson);
  return tokenizer.encode(GATE_TEXT, { add_special_tokens: false }).ids;
}
