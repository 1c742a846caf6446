import Table from 'cli-table3';

/** A cli-table3 table, coloured only on a terminal so logs and pipes stay plain text. */
export function createTable(head: string[]): Table.Table {
  return new Table({ head, style: process.stdout.isTTY ? { head: ['cyan'] } : { head: [], border: [] } });
}
