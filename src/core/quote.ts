/** Characters of a name kept in a message; the rest is elided, so an error never echoes a megabyte. */
export const QUOTED_MAX_CHARACTERS = 120;

// JSON.stringify escapes C0 controls but leaves DEL, C1 controls and the line separators raw.
const UNESCAPED_BY_JSON = /[\u007f-\u009f\u2028\u2029]/g;

/**
 * A name or value as messages and terminals show it: in double quotes, every control
 * character escaped, and cut to `max` characters with "…" and the full length after it.
 */
export function quoted(text: string, max = QUOTED_MAX_CHARACTERS): string {
  const shown = text.length > max ? text.slice(0, max) : text;
  const escaped = JSON.stringify(shown).replace(
    UNESCAPED_BY_JSON,
    (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return text.length > max ? `${escaped.slice(0, -1)}…" (${text.length} characters)` : escaped;
}
