/** Characters of a name kept in a message; the rest is elided, so an error never echoes a megabyte. */
export const QUOTED_MAX_CHARACTERS = 120;

// JSON.stringify escapes C0 controls but leaves DEL, C1 controls and the line separators raw.
const UNESCAPED_BY_JSON = /[\u007f-\u009f\u2028\u2029]/g;

const escapeRest = (json: string): string =>
  json.replace(UNESCAPED_BY_JSON, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`);

/**
 * The first `max` characters of `text`, one fewer where the cut would split a surrogate pair:
 * a lone surrogate makes grpc-js's encodeURI of the status message throw.
 */
export function cutText(text: string, max: number): string {
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/**
 * A name or value as messages and terminals show it: in double quotes, every control
 * character escaped, and cut to `max` characters with "…" and the full length after it.
 */
export function quoted(text: string, max = QUOTED_MAX_CHARACTERS): string {
  const escaped = escapeRest(JSON.stringify(text.length > max ? cutText(text, max) : text));
  return text.length > max ? `${escaped.slice(0, -1)}…" (${text.length} characters)` : escaped;
}

/**
 * A value of any JSON type as a message shows it (a datatype or a shape that is not what it
 * should be): a string quoted, anything else as JSON, cut the same way.
 */
export function shownValue(value: unknown, max = QUOTED_MAX_CHARACTERS): string {
  if (typeof value === 'string') return quoted(value, max);
  const json = escapeRest(JSON.stringify(value) ?? String(value));
  return json.length > max ? `${cutText(json, max)}… (${json.length} characters)` : json;
}
