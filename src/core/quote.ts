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

/** Characters an error may show of a client's bytes: enough to recognise them, never a payload. */
export const SHOWN_INPUT_CHARACTERS = 32;

/**
 * The start of text a client sent, as an error may show it: printable ASCII kept, every other
 * character written as an escape (`\x89`, `\u{fffd}`), cut with "…" where the shown text would
 * pass `max` characters. A PNG's bytes read as latin1 show as `\x89PNG\r\n\x1a\n…`.
 */
export function printablePrefix(text: string, max = SHOWN_INPUT_CHARACTERS): string {
  let shown = '';
  for (const character of text) {
    const code = character.codePointAt(0) as number;
    const escaped =
      code >= 0x20 && code <= 0x7e
        ? character
        : code === 0x0a
          ? '\\n'
          : code === 0x0d
            ? '\\r'
            : code <= 0xff
              ? `\\x${code.toString(16).padStart(2, '0')}`
              : `\\u{${code.toString(16)}}`;
    if (shown.length + escaped.length > max) return `${shown}…`;
    shown += escaped;
  }
  return shown;
}

/** A parser's error as a client may see it: JSON.parse quotes the text it failed on, which may be any bytes. */
export function shownError(error: unknown): string {
  return printablePrefix(error instanceof Error ? error.message : String(error), 120);
}
