import Table from 'cli-table3';

/**
 * A cli-table3 table, coloured only on a terminal so logs and pipes stay plain text. With
 * `colWidths` (padding included), cells wrap at word boundaries to fit them.
 */
export function createTable(head: string[], layout: { colWidths?: number[] } = {}): Table.Table {
  return new Table({
    head,
    style: process.stdout.isTTY ? { head: ['cyan'] } : { head: [], border: [] },
    ...(layout.colWidths ? { colWidths: layout.colWidths, wordWrap: true } : {}),
  });
}
