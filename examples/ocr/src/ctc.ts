/**
 * The recogniser's classes (PaddleOCR's CTCLabelDecode with use_space_char true): index 0 is
 * CTC's blank, then one class per line of the character list, then a space, which the list
 * itself lacks.
 */
export function characterClasses(characterList: string): string[] {
  const lines = characterList.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return ['', ...lines, ' '];
}

export interface DecodedText {
  readonly text: string;
  readonly confidence: number;
}

const BLANK = 0;

/** Lines the recogniser reads with less confidence than this are dropped (PaddleOCR's drop_score). */
export const DROP_SCORE = 0.5;

/**
 * Greedy CTC decoding of the recogniser's [N, T, C] softmax output: the likeliest class at
 * each step, repeats collapsed, blanks dropped. The confidence is the mean probability of the
 * steps that produced a character, 0 for an empty line.
 */
export function decodeCtc(
  probabilities: Float32Array,
  dims: readonly number[],
  classes: readonly string[],
): DecodedText[] {
  const [lines = 0, steps = 0, classCount = 0] = dims;
  if (classCount !== classes.length) {
    throw new RangeError(`the recogniser has ${classCount} classes, the character list makes ${classes.length}`);
  }
  return Array.from({ length: lines }, (_, n) => {
    let text = '';
    let sum = 0;
    let kept = 0;
    let previous = -1;
    for (let t = 0; t < steps; t++) {
      const offset = (n * steps + t) * classCount;
      let best = 0;
      let bestProbability = -Infinity;
      for (let c = 0; c < classCount; c++) {
        const probability = probabilities[offset + c] as number;
        if (probability > bestProbability) {
          best = c;
          bestProbability = probability;
        }
      }
      if (best !== BLANK && best !== previous) {
        text += classes[best];
        sum += bestProbability;
        kept++;
      }
      previous = best;
    }
    return { text, confidence: kept === 0 ? 0 : sum / kept };
  });
}
