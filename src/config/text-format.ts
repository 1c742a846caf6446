import protobuf from 'protobufjs';
import { ConfigInvalidError } from '../core/errors.js';

/**
 * The protobuf text format (protobuf.dev's "Text Format Language Specification"), read and
 * written against a protobufjs message type, so every field the .proto declares parses and
 * nothing else does. Values come out in protobufjs's JSON form with the .proto's own field
 * names: repeated fields as arrays, maps as objects keyed by the key's text, enums by name,
 * 64-bit integers as numbers (as decimal strings past 2^53). No maintained JavaScript reader
 * names the line of a mistake (protobufjs has none; @bufbuild/protobuf's txtpb says neither
 * line nor field), and config.pbtxt errors must say both.
 */
export type TextMessage = Record<string, unknown>;

interface Token {
  readonly kind: 'identifier' | 'number' | 'string' | 'symbol' | 'end';
  /** The token as written; a string's decoded value for `string`. */
  readonly text: string;
  readonly line: number;
}

const SYMBOLS = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-']);
const IDENTIFIER = /[A-Za-z_][\w]*/y;
const NUMBER = /(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)/y;
/** Messages nested deeper than this are a generated mistake, and would exhaust the stack. */
const MAX_DEPTH = 64;

class Tokens {
  readonly #text: string;
  #at = 0;
  #line = 1;
  #peeked: Token | undefined;

  constructor(text: string) {
    this.#text = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  }

  peek(): Token {
    this.#peeked ??= this.#scan();
    return this.#peeked;
  }

  next(): Token {
    const token = this.peek();
    this.#peeked = undefined;
    return token;
  }

  /** Consumes the symbol when it comes next. */
  take(symbol: string): boolean {
    const token = this.peek();
    if (token.kind !== 'symbol' || token.text !== symbol) return false;
    this.next();
    return true;
  }

  #scan(): Token {
    const text = this.#text;
    for (;;) {
      const c = text[this.#at];
      if (c === '\n') this.#line += 1;
      if (c === ' ' || c === '\t' || c === '\r' || c === '\n' || c === '\f' || c === '\v') this.#at += 1;
      else if (c === '#') while (this.#at < text.length && text[this.#at] !== '\n') this.#at += 1;
      else break;
    }
    const line = this.#line;
    if (this.#at >= text.length) return { kind: 'end', text: 'the end of the file', line };
    const c = text[this.#at] as string;
    if (c === '"' || c === "'") return { kind: 'string', text: this.#string(c), line };
    for (const [kind, pattern] of [
      ['identifier', IDENTIFIER],
      ['number', NUMBER],
    ] as const) {
      pattern.lastIndex = this.#at;
      const match = pattern.exec(text);
      if (match) {
        this.#at += match[0].length;
        return { kind, text: match[0], line };
      }
    }
    if (SYMBOLS.has(c)) {
      this.#at += 1;
      return { kind: 'symbol', text: c, line };
    }
    throw new TextFormatProblem(line, `unexpected character ${JSON.stringify(c)}`);
  }

  /**
   * A quoted string with C escapes, as its bytes written one Latin-1 character each: written
   * characters as their UTF-8, octal and hex escapes as the byte they name.
   */
  #string(quote: string): string {
    const text = this.#text;
    const line = this.#line;
    const bytes: number[] = [];
    const utf8 = (chars: string): void => void bytes.push(...Buffer.from(chars, 'utf8'));
    this.#at += 1;
    for (;;) {
      const c = text.codePointAt(this.#at);
      if (c === undefined || c === 0x0a) throw new TextFormatProblem(line, 'unterminated string');
      const char = String.fromCodePoint(c);
      this.#at += char.length;
      if (char === quote) return Buffer.from(bytes).toString('latin1');
      if (char !== '\\') {
        utf8(char);
        continue;
      }
      const e = text[this.#at] ?? '';
      this.#at += 1;
      const rest = text.slice(this.#at - 1);
      if (e in SIMPLE_ESCAPES) bytes.push((SIMPLE_ESCAPES[e] as string).charCodeAt(0));
      else if (/[0-7]/.test(e)) {
        const digits = /^[0-7]{1,3}/.exec(rest)?.[0] as string;
        this.#at += digits.length - 1;
        bytes.push(parseInt(digits, 8) & 0xff);
      } else if (e === 'x' && /^x[0-9a-fA-F]/.test(rest)) {
        const digits = /^x([0-9a-fA-F]{1,2})/.exec(rest)?.[1] as string;
        this.#at += digits.length;
        bytes.push(parseInt(digits, 16));
      } else if (e === 'u' && /^u[0-9a-fA-F]{4}/.test(rest)) {
        utf8(String.fromCodePoint(parseInt(rest.slice(1, 5), 16)));
        this.#at += 4;
      } else if (e === 'U' && /^U[0-9a-fA-F]{8}/.test(rest) && parseInt(rest.slice(1, 9), 16) <= 0x10ffff) {
        utf8(String.fromCodePoint(parseInt(rest.slice(1, 9), 16)));
        this.#at += 8;
      } else throw new TextFormatProblem(line, `invalid escape \\${e} in a string`);
    }
  }
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  n: '\n',
  t: '\t',
  r: '\r',
  a: '\x07',
  b: '\b',
  f: '\f',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
};

/** A mistake at a line; `field` (the path to it) is filled in as the parser unwinds. */
class TextFormatProblem extends Error {
  constructor(
    readonly line: number,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/**
 * Parses `text` as a `type` message. Throws ConfigInvalidError whose one problem reads
 * `line N: field.path: what is wrong`.
 */
export function parseTextFormat(type: protobuf.Type, text: string, source: string): TextMessage {
  const tokens = new Tokens(text);
  try {
    const message = readFields(type, tokens, 'end', '', 0);
    return message;
  } catch (error) {
    if (!(error instanceof TextFormatProblem)) throw error;
    const where = error.field ? `${error.field}: ` : '';
    throw new ConfigInvalidError(source, [`line ${error.line}: ${where}${error.message}`]);
  }
}

function readFields(type: protobuf.Type, tokens: Tokens, closer: string, path: string, depth: number): TextMessage {
  if (depth > MAX_DEPTH) throw new TextFormatProblem(tokens.peek().line, `messages nested deeper than ${MAX_DEPTH}`);
  const message: TextMessage = {};
  const oneofs = new Map<string, string>();
  for (;;) {
    const start = tokens.next();
    if (closer === 'end' ? start.kind === 'end' : start.kind === 'symbol' && start.text === closer) return message;
    if (start.kind === 'end')
      throw new TextFormatProblem(start.line, `expected "${closer}" before the end of the file`);
    if (start.kind === 'symbol' && start.text === '[') {
      throw new TextFormatProblem(start.line, `extensions and Any ([…] names) are not fields of ${type.name}`, path);
    }
    if (start.kind !== 'identifier') {
      throw new TextFormatProblem(start.line, `expected a field name, got ${describe(start)}`, path);
    }
    const field = type.fields[start.text];
    const fieldPath = path ? `${path}.${start.text}` : start.text;
    if (!field) {
      throw new TextFormatProblem(start.line, `${type.name} has no field "${start.text}"`, path || undefined);
    }
    field.resolve();
    const oneof = field.partOf;
    if (oneof) {
      const set = oneofs.get(oneof.name);
      if (set !== undefined && set !== field.name) {
        throw new TextFormatProblem(
          start.line,
          `"${set}" is set already, and only one of ${oneof.oneof.join(', ')} may be`,
          fieldPath,
        );
      }
      oneofs.set(oneof.name, field.name);
    }
    readField(field, message, tokens, fieldPath, start.line, depth);
    if (!tokens.take(',')) tokens.take(';');
  }
}

function readField(
  field: protobuf.Field,
  message: TextMessage,
  tokens: Tokens,
  path: string,
  line: number,
  depth: number,
): void {
  const isMessage = field.map || field.resolvedType instanceof protobuf.Type;
  const colon = tokens.take(':');
  if (!isMessage && !colon) throw new TextFormatProblem(tokens.peek().line, `expected ":" after the field name`, path);
  const many = field.repeated || field.map;
  const values: unknown[] = [];
  if (tokens.take('[')) {
    if (!many) throw new TextFormatProblem(line, 'a list given to a field that is not repeated', path);
    if (!tokens.take(']')) {
      do {
        values.push(readValue(field, tokens, `${path}[${countOf(message[field.name]) + values.length}]`, depth));
      } while (tokens.take(','));
      const close = tokens.next();
      if (close.kind !== 'symbol' || close.text !== ']') {
        throw new TextFormatProblem(close.line, `expected "," or "]" in the list, got ${describe(close)}`, path);
      }
    }
  } else {
    values.push(readValue(field, tokens, field.repeated ? `${path}[${countOf(message[field.name])}]` : path, depth));
  }
  if (field.map) {
    const map = (message[field.name] ??= {}) as Record<string, unknown>;
    for (const value of values) {
      const entry = value as { key: string; value: unknown };
      // A key may be any string, "__proto__" too: an own property, never the object's prototype.
      Object.defineProperty(map, entry.key, {
        value: entry.value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  } else if (field.repeated) {
    const list = (message[field.name] ??= []) as unknown[];
    list.push(...values);
  } else {
    if (field.name in message) throw new TextFormatProblem(line, 'set twice, and it is not a repeated field', path);
    message[field.name] = values[0];
  }
}

function countOf(value: unknown): number {
  return Array.isArray(value) ? value.length : 0;
}

function readValue(field: protobuf.Field, tokens: Tokens, path: string, depth: number): unknown {
  if (field.map) return readMapEntry(field as unknown as protobuf.MapField, tokens, path, depth);
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    const open = tokens.next();
    if (open.kind !== 'symbol' || (open.text !== '{' && open.text !== '<')) {
      throw new TextFormatProblem(open.line, `expected "{" to open a ${resolved.name}, got ${describe(open)}`, path);
    }
    return readFields(resolved, tokens, open.text === '{' ? '}' : '>', path, depth + 1);
  }
  return readScalar(field.type, resolved instanceof protobuf.Enum ? resolved : undefined, tokens, path);
}

function readMapEntry(
  field: protobuf.MapField,
  tokens: Tokens,
  path: string,
  depth: number,
): { key: string; value: unknown } {
  const open = tokens.next();
  if (open.kind !== 'symbol' || (open.text !== '{' && open.text !== '<')) {
    throw new TextFormatProblem(open.line, `expected "{" to open a map entry, got ${describe(open)}`, path);
  }
  const closer = open.text === '{' ? '}' : '>';
  let key: unknown;
  let value: unknown;
  for (;;) {
    if (tokens.take(closer)) break;
    const name = tokens.next();
    if (name.kind !== 'identifier' || (name.text !== 'key' && name.text !== 'value')) {
      throw new TextFormatProblem(name.line, `expected "key" or "value" in a map entry, got ${describe(name)}`, path);
    }
    if ((name.text === 'key' ? key : value) !== undefined) {
      throw new TextFormatProblem(name.line, `the map entry's "${name.text}" is set twice`, path);
    }
    if (name.text === 'key') {
      if (!tokens.take(':')) throw new TextFormatProblem(name.line, 'expected ":" after key', path);
      key = readScalar(field.keyType, undefined, tokens, `${path}.key`);
    } else {
      const resolved = field.resolvedType;
      const colon = tokens.take(':');
      if (resolved instanceof protobuf.Type) {
        const inner = tokens.next();
        if (inner.kind !== 'symbol' || (inner.text !== '{' && inner.text !== '<')) {
          throw new TextFormatProblem(
            inner.line,
            `expected "{" to open a ${resolved.name}, got ${describe(inner)}`,
            path,
          );
        }
        value = readFields(resolved, tokens, inner.text === '{' ? '}' : '>', `${path}.value`, depth + 1);
      } else {
        if (!colon) throw new TextFormatProblem(name.line, 'expected ":" after value', path);
        value = readScalar(
          field.type,
          resolved instanceof protobuf.Enum ? resolved : undefined,
          tokens,
          `${path}.value`,
        );
      }
    }
    if (!tokens.take(',')) tokens.take(';');
  }
  const resolved = field.resolvedType;
  return {
    key: String(key ?? defaultScalar(field.keyType)),
    value:
      value ??
      (resolved instanceof protobuf.Type
        ? {}
        : resolved instanceof protobuf.Enum
          ? enumName(resolved, 0)
          : defaultScalar(field.type)),
  };
}

const INTEGER_RANGES: Record<string, [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

function defaultScalar(type: string): unknown {
  if (type === 'bool') return false;
  if (type === 'string' || type === 'bytes') return '';
  return 0;
}

function enumName(type: protobuf.Enum, number: number): string | number {
  return type.valuesById[number] ?? number;
}

function readScalar(type: string, enumType: protobuf.Enum | undefined, tokens: Tokens, path: string): unknown {
  const negative = tokens.take('-');
  const token = tokens.next();
  const fail = (what: string): never => {
    throw new TextFormatProblem(token.line, `expected ${what}, got ${negative ? '-' : ''}${describe(token)}`, path);
  };
  if (type === 'string' || type === 'bytes') {
    if (negative || token.kind !== 'string') return fail('a quoted string');
    let value = token.text;
    // Adjacent strings are one string, as in C.
    while (tokens.peek().kind === 'string') value += tokens.next().text;
    const bytes = Buffer.from(value, 'latin1');
    return type === 'bytes' ? bytes.toString('base64') : bytes.toString('utf8');
  }
  if (enumType) {
    if (token.kind === 'identifier' && !negative) {
      if (token.text in enumType.values) return token.text;
      return fail(`one of ${Object.keys(enumType.values).join(', ')}`);
    }
    if (token.kind === 'number') {
      const number = parseInteger(token.text, negative);
      if (number !== undefined && number >= -(2n ** 31n) && number < 2n ** 31n)
        return enumName(enumType, Number(number));
    }
    return fail(`one of ${Object.keys(enumType.values).join(', ')}`);
  }
  if (type === 'bool') {
    if (negative) return fail('true or false');
    if (token.kind === 'identifier' && ['true', 'True', 't'].includes(token.text)) return true;
    if (token.kind === 'identifier' && ['false', 'False', 'f'].includes(token.text)) return false;
    if (token.kind === 'number' && (token.text === '1' || token.text === '0')) return token.text === '1';
    return fail('true or false');
  }
  if (type === 'float' || type === 'double') {
    if (token.kind === 'identifier') {
      const lower = token.text.toLowerCase();
      if (lower === 'inf' || lower === 'infinity') return negative ? -Infinity : Infinity;
      if (lower === 'nan') return NaN;
      return fail('a number');
    }
    if (token.kind !== 'number') return fail('a number');
    const integer =
      /^0[xX]/.test(token.text) || /^0[0-7]+$/.test(token.text) ? parseInteger(token.text, negative) : undefined;
    const value =
      integer !== undefined ? Number(integer) : Number(token.text.replace(/[fF]$/, '')) * (negative ? -1 : 1);
    return type === 'float' ? Math.fround(value) : value;
  }
  const range = INTEGER_RANGES[type];
  if (!range) throw new TextFormatProblem(token.line, `unsupported field type ${type}`, path);
  const number = token.kind === 'number' ? parseInteger(token.text, negative) : undefined;
  if (number === undefined) return fail('an integer');
  if (number < range[0] || number > range[1]) {
    throw new TextFormatProblem(token.line, `${number} is out of range for ${type} (${range[0]} to ${range[1]})`, path);
  }
  return Number.isSafeInteger(Number(number)) ? Number(number) : number.toString();
}

/** A decimal, hexadecimal (0x) or octal (leading 0) integer; undefined for anything else. */
function parseInteger(text: string, negative: boolean): bigint | undefined {
  let value: bigint;
  if (/^0[xX][0-9a-fA-F]+$/.test(text)) value = BigInt(text);
  else if (/^0[0-7]+$/.test(text)) value = BigInt(`0o${text.slice(1)}`);
  else if (/^(0|[1-9]\d*)$/.test(text)) value = BigInt(text);
  else return undefined;
  return negative ? -value : value;
}

function describe(token: Token): string {
  if (token.kind === 'end') return token.text;
  if (token.kind === 'string') return `the string ${JSON.stringify(token.text)}`;
  return `"${token.text}"`;
}

/**
 * Writes a message (in the form parseTextFormat returns) as text, fields in the .proto's
 * order, two spaces an indent, as Triton's own config files are laid out.
 */
export function writeTextFormat(type: protobuf.Type, message: TextMessage): string {
  const lines: string[] = [];
  writeFields(type, message, '', lines);
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

function writeFields(type: protobuf.Type, message: TextMessage, indent: string, lines: string[]): void {
  for (const field of type.fieldsArray) {
    const value = message[field.name];
    if (value === undefined || value === null) continue;
    field.resolve();
    const resolved = field.resolvedType;
    if (field.map) {
      const map = field as unknown as protobuf.MapField;
      for (const [key, entry] of Object.entries(value as Record<string, unknown>)) {
        lines.push(`${indent}${field.name} {`);
        lines.push(`${indent}  key: ${formatScalar(map.keyType, undefined, key)}`);
        if (resolved instanceof protobuf.Type) {
          lines.push(`${indent}  value {`);
          writeFields(resolved, entry as TextMessage, `${indent}    `, lines);
          lines.push(`${indent}  }`);
        } else {
          lines.push(
            `${indent}  value: ${formatScalar(field.type, resolved instanceof protobuf.Enum ? resolved : undefined, entry)}`,
          );
        }
        lines.push(`${indent}}`);
      }
    } else if (resolved instanceof protobuf.Type) {
      const items = field.repeated ? (value as TextMessage[]) : [value as TextMessage];
      if (field.repeated && items.length === 0) continue;
      if (field.repeated) lines.push(`${indent}${field.name} [`);
      items.forEach((item, index) => {
        const inner = field.repeated ? `${indent}  ` : indent;
        lines.push(field.repeated ? `${inner}{` : `${indent}${field.name} {`);
        writeFields(resolved, item, `${inner}  `, lines);
        lines.push(`${inner}}${field.repeated && index < items.length - 1 ? ',' : ''}`);
      });
      if (field.repeated) lines.push(`${indent}]`);
    } else {
      const enumType = resolved instanceof protobuf.Enum ? resolved : undefined;
      if (field.repeated) {
        const items = (value as unknown[]).map((item) => formatScalar(field.type, enumType, item));
        if (items.length > 0) lines.push(`${indent}${field.name}: [ ${items.join(', ')} ]`);
      } else {
        lines.push(`${indent}${field.name}: ${formatScalar(field.type, enumType, value)}`);
      }
    }
  }
}

function formatScalar(type: string, enumType: protobuf.Enum | undefined, value: unknown): string {
  if (enumType) return typeof value === 'number' ? (enumType.valuesById[value] ?? String(value)) : String(value);
  if (type === 'string') return quote(Buffer.from(String(value), 'utf8').toString('latin1'));
  if (type === 'bytes') return quote(Buffer.from(String(value), 'base64').toString('latin1'));
  if (type === 'bool') return value === true || value === 'true' ? 'true' : 'false';
  if (type === 'float' || type === 'double') {
    const number = Number(value);
    if (Number.isNaN(number)) return 'nan';
    if (!Number.isFinite(number)) return number > 0 ? 'inf' : '-inf';
    return Object.is(number, -0) ? '-0' : String(number);
  }
  return String(value);
}

/** Bytes (Latin-1 characters) as a double-quoted string; non-printing bytes as octal escapes. */
function quote(latin1: string): string {
  let out = '"';
  for (const c of latin1) {
    const code = c.charCodeAt(0);
    if (c === '"' || c === '\\') out += `\\${c}`;
    else if (c === '\n') out += '\\n';
    else if (code < 0x20 || code >= 0x7f) out += `\\${code.toString(8).padStart(3, '0')}`;
    else out += c;
  }
  return `${out}"`;
}
