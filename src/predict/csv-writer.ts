import { jsonData, parseAnswer, RecordLayout, TextFile, type OutputColumn } from './jsonl-writer.js';
import type { OutputTensor, RecordWriter } from './records.js';

/**
 * Outputs of up to this many elements get one column per element; larger ones (an embedding,
 * an image) one column holding the JSON array, which spreadsheets and pandas still read as one
 * cell instead of thousands of columns.
 */
export const CSV_MAX_ELEMENT_COLUMNS = 64;

/**
 * CSV (RFC 4180: CRLF line ends, a field with `"`, `,`, CR or LF quoted, `"` doubled), with a
 * header. Columns: id, model, version, then per output either `<output>[i]` for each element i
 * of its row-major flattened data (when it has at most CSV_MAX_ELEMENT_COLUMNS elements) or
 * `<output>` holding the data as a JSON array in the v2 JSON spelling; or a single `answer`
 * column with the handler's answer as one-line JSON. The shape is not in the file.
 * Cells: numbers in JavaScript's round-trip spelling (an FP32 value as the double it widens
 * to), -0 as "-0", "NaN", "Infinity", "-Infinity"; INT64/UINT64 exact; BOOL true/false; BYTES
 * as the string. An empty run writes the header `id,model,version`.
 */
export async function openCsvWriter(path: string): Promise<RecordWriter> {
  const file = await TextFile.open(path);
  let layout: RecordLayout | undefined;
  return {
    async write(record) {
      const first = layout === undefined;
      layout = RecordLayout.check(layout, record);
      const header = first ? headerLine(layout) : '';
      const cells = [field(record.id), field(record.model), field(record.version)];
      if (layout.outputs) {
        for (const column of layout.outputs) {
          const { data } = record.outputs?.[column.name] as OutputTensor;
          if (column.count > CSV_MAX_ELEMENT_COLUMNS) {
            cells.push(field(JSON.stringify(jsonData(column.datatype, data))));
          } else {
            for (const value of data) cells.push(field(cell(value)));
          }
        }
      } else {
        cells.push(field(JSON.stringify(parseAnswer(record))));
      }
      return file.write(`${header}${cells.join(',')}\r\n`);
    },
    async close() {
      if (layout === undefined) await file.write('id,model,version\r\n');
      await file.close();
    },
  };
}

function headerLine(layout: RecordLayout): string {
  const names = ['id', 'model', 'version'];
  if (!layout.outputs) names.push('answer');
  else for (const column of layout.outputs) names.push(...columnNames(column));
  return `${names.map(field).join(',')}\r\n`;
}

function columnNames({ name, count }: OutputColumn): string[] {
  if (count > CSV_MAX_ELEMENT_COLUMNS) return [name];
  return Array.from({ length: count }, (_, i) => `${name}[${i}]`);
}

function cell(value: OutputTensor['data'][number]): string {
  return Object.is(value, -0) ? '-0' : String(value);
}

const NEEDS_QUOTES = /[",\r\n]/;

function field(text: string): string {
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
