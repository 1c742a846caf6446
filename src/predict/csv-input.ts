import { createReadStream } from 'node:fs';
import { DatasetError, InferenceInputError } from '../core/errors.js';
import type { TensorSpec } from '../core/tensors.js';
import { readJsonTensor } from '../protocol/json-tensor.js';
import { prepareDecoded, type ModelSignature } from '../protocol/prepared-request.js';
import {
  preparedRow,
  rowFailure,
  type Dataset,
  type DatasetRow,
  type InputIdentity,
  type InputSpec,
  type LocatedInput,
} from './dataset.js';

/**
 * CSV for tabular models (RFC 4180: quoted fields, `""` inside quotes, CRLF or LF). The first
 * record is the header; `--csv-columns` picks the columns that make the model's one input, in
 * order (default: every column but the id column). A row's id is its `--id-column` value, else
 * the line its record starts on.
 */
export function locateCsv(identity: InputIdentity, spec: InputSpec): LocatedInput {
  return {
    identity,
    async open(signature) {
      let header: readonly string[] | undefined;
      let rowCount = 0;
      for await (const record of csvRecords(identity.path)) {
        if (header) rowCount++;
        else header = record.fields;
      }
      if (!header) throw new DatasetError(`${identity.path} is empty: a CSV input needs a header row`);
      return csvDataset(identity.path, rowCount, layoutOf(header, spec, signature, identity.path), signature);
    },
  };
}

interface CsvLayout {
  readonly input: TensorSpec;
  readonly columns: readonly number[];
  readonly idColumn: number | undefined;
  readonly width: number;
}

function layoutOf(header: readonly string[], spec: InputSpec, signature: ModelSignature, path: string): CsvLayout {
  const [input, ...others] = signature.inputs;
  if (!input || others.length > 0) {
    throw new DatasetError(
      `${path}: CSV columns feed a model with one input; this one takes ${signature.inputs.map((item) => item.name).join(', ')}`,
    );
  }
  const indexOf = (name: string, flag: string): number => {
    const index = header.indexOf(name);
    if (index === -1)
      throw new DatasetError(`${flag} ${name}: ${path} has no such column (it has ${header.join(', ')})`);
    return index;
  };
  const idColumn = spec.idColumn === undefined ? undefined : indexOf(spec.idColumn, '--id-column');
  const columns = spec.csvColumns
    ? spec.csvColumns.map((name) => indexOf(name, '--csv-columns'))
    : header.map((_, index) => index).filter((index) => index !== idColumn);
  const dims = signature.batching ? [1, columns.length] : [columns.length];
  const fits = input.shape.length === dims.length && input.shape.every((dim, axis) => dim === -1 || dim === dims[axis]);
  if (!fits || columns.length === 0) {
    throw new DatasetError(
      `${path}: ${columns.length} columns make rows of [${columns.length}]; the model's input "${input.name}" is [${input.shape.join(', ')}]`,
    );
  }
  return { input, columns, idColumn, width: header.length };
}

function csvDataset(path: string, rowCount: number, layout: CsvLayout, signature: ModelSignature): Dataset {
  return {
    rowCount,
    async *rows(from, to): AsyncGenerator<DatasetRow> {
      let row = -1;
      for await (const record of csvRecords(path)) {
        if (row >= to) return;
        if (row >= from) yield csvRow(row, record, layout, signature);
        row++;
      }
    },
  };
}

function csvRow(row: number, record: CsvRecord, layout: CsvLayout, signature: ModelSignature): DatasetRow {
  const id = layout.idColumn === undefined ? String(record.line) : (record.fields[layout.idColumn] ?? '');
  try {
    if (record.fields.length !== layout.width) {
      throw new InferenceInputError(
        `line ${record.line} has ${record.fields.length} fields, the header ${layout.width}`,
      );
    }
    const { input, columns } = layout;
    const values = columns.map((column) => cellValue(record.fields[column] as string, input));
    const dims = signature.batching ? [1, columns.length] : [columns.length];
    const tensor = readJsonTensor(
      { name: input.name, datatype: input.datatype, dims, count: columns.length },
      values,
      columns.length,
    );
    const prepared = prepareDecoded(
      { parameters: {}, inputs: { [input.name]: tensor }, binaryDataOutput: false },
      signature,
    );
    return preparedRow(row, id, prepared);
  } catch (error) {
    return { row, id, failure: rowFailure(error) };
  }
}

/**
 * A cell as the v2 JSON reader takes it: numbers, booleans, strings for BYTES; big 64-bit
 * integers and non-finite floats stay strings, which that reader parses exactly.
 */
function cellValue(cell: string, input: TensorSpec): unknown {
  const text = cell.trim();
  if (input.datatype === 'BYTES') return cell;
  if (input.datatype === 'BOOL') {
    if (/^(true|1)$/i.test(text)) return true;
    if (/^(false|0)$/i.test(text)) return false;
    throw new InferenceInputError(`"${cell}" is not a boolean`);
  }
  if (text === 'NaN' || text === 'Infinity' || text === '-Infinity') return text;
  const number = Number(text);
  if (text === '' || Number.isNaN(number)) throw new InferenceInputError(`"${cell}" is not a number`);
  const wide = input.datatype === 'INT64' || input.datatype === 'UINT64';
  return wide && !Number.isSafeInteger(number) && /^[-+]?\d+$/.test(text) ? text : number;
}

export interface CsvRecord {
  /** The 1-based line the record starts on. */
  readonly line: number;
  readonly fields: readonly string[];
}

/** The file's records, blank lines skipped; a quoted field may hold commas, quotes and line ends. */
export async function* csvRecords(path: string): AsyncGenerator<CsvRecord> {
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  let afterQuote = false;
  let line = 1;
  let start = 1;
  let empty = true;
  const stream = createReadStream(path, { encoding: 'utf8', highWaterMark: 1 << 20 });
  for await (const chunk of stream as AsyncIterable<string>) {
    for (let index = 0; index < chunk.length; index++) {
      const char = chunk[index] as string;
      if (quoted) {
        if (char === '"') {
          quoted = false;
          afterQuote = true;
        } else {
          if (char === '\n') line++;
          field += char;
        }
        continue;
      }
      if (char === '"') {
        // `""` inside a quoted field is a quote; a quote opening a field starts quoting.
        if (afterQuote) field += '"';
        quoted = true;
        afterQuote = false;
        empty = false;
      } else if (char === ',') {
        fields.push(field);
        field = '';
        afterQuote = false;
        empty = false;
      } else if (char === '\n') {
        if (!empty) {
          fields.push(field);
          yield { line: start, fields };
        }
        fields = [];
        field = '';
        afterQuote = false;
        empty = true;
        line++;
        start = line;
      } else if (char !== '\r') {
        field += char;
        afterQuote = false;
        empty = false;
      }
    }
  }
  if (quoted) throw new DatasetError(`${path}: a quoted field opened on line ${start} never closes`);
  if (!empty) {
    fields.push(field);
    yield { line: start, fields };
  }
}
