import { readdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * A model's prediction log is a folder of `predictions-NNNNNN.jsonl` files, numbered upward.
 * Files are never renamed: the highest number is the one being written, rotation starts the
 * next, and the oldest are deleted past `max_files`, so a reader never races a rename.
 */
const LOG_FILE = /^predictions-(\d{6,})\.jsonl$/;

export function logFileName(sequence: number): string {
  return `predictions-${String(sequence).padStart(6, '0')}.jsonl`;
}

export interface LogFile {
  readonly path: string;
  readonly sequence: number;
}

/** The log files in `folder`, oldest first; none when the folder does not exist. */
export async function listLogFiles(folder: string): Promise<LogFile[]> {
  let names: string[];
  try {
    names = await readdir(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const files: LogFile[] = [];
  for (const name of names) {
    const match = LOG_FILE.exec(name);
    if (match) files.push({ path: path.join(folder, name), sequence: Number(match[1]) });
  }
  return files.sort((a, b) => a.sequence - b.sequence);
}
