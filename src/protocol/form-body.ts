import { InferenceInputError } from '../core/errors.js';
import { printablePrefix } from '../core/quote.js';

/** One field of an HTML form body: its name, its bytes exactly as sent, and a part's own media type. */
export interface FormPart {
  readonly name: string;
  readonly data: Buffer;
  readonly contentType: string | undefined;
}

/** Media types TorchServe clients upload with (`curl -F data=@kitten.jpg`, `curl -d data=…`). */
export const FORM_TYPES: readonly string[] = ['multipart/form-data', 'application/x-www-form-urlencoded'];

/** More fields than this in one body is not an upload but an attack on the parser. */
export const MAX_FORM_PARTS = 256;

const CRLF = Buffer.from('\r\n');
const HEADERS_END = Buffer.from('\r\n\r\n');

/**
 * A form body's fields in order. Multipart parts keep their bytes untouched (an image sent
 * without a filename is still an image: WHATWG's FormData would decode it as UTF-8 text), so
 * the body is split on its boundary here rather than by `Response.formData()`.
 */
export function parseFormBody(body: Buffer, contentTypeHeader: string): FormPart[] {
  const mediaType = contentTypeHeader.split(';')[0]?.trim().toLowerCase();
  return mediaType === 'application/x-www-form-urlencoded'
    ? urlEncodedParts(body)
    : multipartParts(body, boundaryOf(contentTypeHeader));
}

function boundaryOf(contentTypeHeader: string): string {
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentTypeHeader);
  const boundary = match?.[1] ?? match?.[2];
  if (!boundary) throw new InferenceInputError('multipart/form-data without a boundary parameter in Content-Type');
  return boundary;
}

function urlEncodedParts(body: Buffer): FormPart[] {
  // Decoded by hand, not with URLSearchParams: it turns every value into UTF-8 text, and a
  // field's bytes are kept exactly.
  const pairs = body
    .toString('latin1')
    .split('&')
    .filter((pair) => pair.length > 0);
  if (pairs.length > MAX_FORM_PARTS) throw tooManyParts(pairs.length);
  return pairs.map((pair) => {
    const equals = pair.indexOf('=');
    const name = equals === -1 ? pair : pair.slice(0, equals);
    const value = equals === -1 ? '' : pair.slice(equals + 1);
    return { name: percentDecode(name).toString('utf8'), data: percentDecode(value), contentType: undefined };
  });
}

/** `+` is a space and `%XX` a byte, as application/x-www-form-urlencoded says; the bytes exactly. */
function percentDecode(text: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === 0x2b) bytes.push(0x20);
    else if (char === 0x25 && /^[0-9a-f]{2}$/i.test(text.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(char & 0xff);
  }
  return Buffer.from(bytes);
}

function multipartParts(body: Buffer, boundary: string): FormPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: FormPart[] = [];
  let at = body.indexOf(delimiter);
  if (at === -1) throw new InferenceInputError(`the multipart body holds no "--${boundary}" boundary`);
  for (;;) {
    const afterDelimiter = at + delimiter.length;
    if (body.subarray(afterDelimiter, afterDelimiter + 2).toString('latin1') === '--') return parts;
    if (!body.subarray(afterDelimiter, afterDelimiter + 2).equals(CRLF)) {
      throw new InferenceInputError('the multipart body is malformed: a boundary is not followed by a line break');
    }
    const headersStart = afterDelimiter + 2;
    const headersEnd = body.indexOf(HEADERS_END, headersStart);
    const next = body.indexOf(Buffer.concat([CRLF, delimiter]), headersStart);
    if (headersEnd === -1 || next === -1 || headersEnd > next) {
      throw new InferenceInputError('the multipart body is truncated: a part has no end boundary');
    }
    if (parts.length === MAX_FORM_PARTS) throw tooManyParts(parts.length + 1);
    const headers = partHeaders(body.subarray(headersStart, headersEnd).toString('latin1'));
    parts.push({ ...headers, data: body.subarray(headersEnd + HEADERS_END.length, next) });
    at = next + CRLF.length;
  }
}

function partHeaders(block: string): Omit<FormPart, 'data'> {
  let name: string | undefined;
  let contentType: string | undefined;
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    const field = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (field === 'content-disposition') {
      const match = /;\s*name="([^"]*)"|;\s*name=([^\s;]+)/i.exec(value);
      name = match?.[1] ?? match?.[2];
    } else if (field === 'content-type') {
      contentType = value.split(';')[0]?.trim().toLowerCase() || undefined;
    }
  }
  if (name === undefined) throw new InferenceInputError('a multipart part has no Content-Disposition name');
  return { name: Buffer.from(name, 'latin1').toString('utf8'), contentType };
}

function tooManyParts(count: number): InferenceInputError {
  return new InferenceInputError(`the form has ${count} fields; at most ${MAX_FORM_PARTS} are read`);
}

/** The fields TorchServe's handlers read a request from (`data`, else `body`). */
const UPLOAD_FIELDS: ReadonlySet<string> = new Set(['data', 'body']);

/** Fields named in one error at most; their names are cut to a short printable prefix. */
const NAMED_FIELDS = 5;

/**
 * The requests a TorchServe-style form upload holds: each `data` or `body` field one request,
 * in order. Any other field is refused rather than dropped: no built-in handler would read it.
 * Undefined when the body is not a form at all, whatever its Content-Type says: curl's
 * `--data-binary @kitten.jpg` labels the image application/x-www-form-urlencoded, and TorchServe
 * takes such a body as the raw input (see `looksLikeForm`).
 */
export function uploadedRequests(body: Buffer, contentTypeHeader: string | undefined): FormPart[] | undefined {
  if (contentTypeHeader === undefined || !looksLikeForm(body, contentTypeHeader)) return undefined;
  const parts = parseFormBody(body, contentTypeHeader);
  const unread = [
    ...new Set(parts.filter((part) => !UPLOAD_FIELDS.has(part.name)).map((part) => `"${printablePrefix(part.name)}"`)),
  ];
  if (unread.length > 0) {
    const named = unread.slice(0, NAMED_FIELDS).join(', ') + (unread.length > NAMED_FIELDS ? ', …' : '');
    throw new InferenceInputError(
      `form field${unread.length === 1 ? '' : 's'} ${named} not read: each request is a field named "data" or "body"`,
    );
  }
  if (parts.length === 0) throw new InferenceInputError('the form has no "data" or "body" field to predict on');
  const empty = parts.findIndex((part) => part.data.length === 0);
  if (empty !== -1) throw new InferenceInputError(`form field ${empty + 1} ("${parts[empty]?.name}") is empty`);
  return parts;
}

/** The start of a url-encoded form: a field name, then `=`. */
const URLENCODED_START = /^[\w.~*%+-]+=/;

/**
 * Whether a body sent with a form's Content-Type is one. A url-encoded form is text (printable
 * ASCII, tabs and line breaks) that starts with `name=`: an image, JSON, or a line of text sent
 * with curl's --data-binary default type is not. A multipart body holds its boundary line; one
 * without it is not a form. Anything else is the raw input.
 */
function looksLikeForm(body: Buffer, contentTypeHeader: string): boolean {
  const mediaType = contentTypeHeader.split(';')[0]?.trim().toLowerCase();
  if (mediaType === 'multipart/form-data') return body.includes(`--${boundaryOf(contentTypeHeader)}`);
  if (mediaType !== 'application/x-www-form-urlencoded') return false;
  for (const byte of body) {
    if ((byte < 0x20 || byte > 0x7e) && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) return false;
  }
  return URLENCODED_START.test(body.toString('latin1', 0, Math.min(body.length, 256)));
}
