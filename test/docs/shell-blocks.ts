import { spawnSync } from 'node:child_process';

// The shell blocks of a Markdown page as the docs test runs them; the convention is in
// docs/testing.md ("Commands in the docs"). Pure: reading and matching only.

/** What an HTML comment just before a block tells the test. */
export type BlockMarker = { kind: 'skip'; reason: string } | { kind: 'before'; commands: string };

export interface Command {
  /** The command as bash reads it: continuation lines and compound commands whole. */
  readonly text: string;
  /** Its first line in the page, 1-based. */
  readonly line: number;
  /** The output the page shows for it, one entry a line (empty when it shows none). */
  readonly shown: string[];
}

export interface ShellBlock {
  /** The line of the opening fence, 1-based. */
  readonly line: number;
  readonly commands: Command[];
  readonly skip?: string;
  /** Commands the test runs first, hidden from the rendered page: stand-ins for files a reader brings. */
  readonly before?: string;
}

const SHELL_FENCE = /^```(?:sh|bash|shell)\s*$/;
const MARKER = /<!--\s*docs-test:\s*([\s\S]*?)-->\s*$/;
/** `# → text`, on a line of its own or after a command. */
const SHOWN_LINE = /^\s*# → ?(.*)$/;
const SHOWN_AFTER = /\s# → ?(.*)$/;

/** The page's shell blocks, in order, with their markers and shown output. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split('\n');
  const blocks: ShellBlock[] = [];
  let at = 0;
  while (at < lines.length) {
    const fence = /^```(\S*)/.exec(lines[at] ?? '');
    if (!fence) {
      at += 1;
      continue;
    }
    const start = at;
    const end = lines.findIndex((line, index) => index > start && line.startsWith('```'));
    if (end === -1) throw new Error(`line ${start + 1}: a code block that never closes`);
    if (SHELL_FENCE.test(lines[start] ?? '')) {
      const marker = markerBefore(lines, start);
      const commands = commandsOf(lines.slice(start + 1, end), start + 2);
      const output = outputBlockAfter(lines, end);
      const last = commands.at(-1);
      if (output && last) last.shown.push(...output);
      blocks.push({
        line: start + 1,
        commands,
        ...(marker?.kind === 'skip' ? { skip: marker.reason } : {}),
        ...(marker?.kind === 'before' ? { before: marker.commands } : {}),
      });
    }
    at = end + 1;
  }
  return blocks;
}

/** The `<!-- docs-test: … -->` comment ending on the last non-blank line before `fence`. */
function markerBefore(lines: readonly string[], fence: number): BlockMarker | undefined {
  let end = fence - 1;
  while (end >= 0 && (lines[end] ?? '').trim() === '') end -= 1;
  if (!(lines[end] ?? '').trimEnd().endsWith('-->')) return undefined;
  let begin = end;
  while (begin >= 0 && !(lines[begin] ?? '').includes('<!--')) begin -= 1;
  const body = MARKER.exec(lines.slice(begin, end + 1).join('\n'))?.[1]?.trim();
  if (body === undefined) return undefined;
  const skip = /^skip \((.+)\)$/s.exec(body);
  if (skip) return { kind: 'skip', reason: (skip[1] ?? '').replace(/\s+/g, ' ') };
  const before = /^before\n([\s\S]+)$/.exec(body);
  if (before) return { kind: 'before', commands: before[1] ?? '' };
  throw new Error(`line ${begin + 1}: a docs-test marker is "skip (reason)" or "before" and commands, not "${body}"`);
}

/** A ```text block right after the shell block (blank lines between at most): its last command's output. */
function outputBlockAfter(lines: readonly string[], closing: number): string[] | undefined {
  let next = closing + 1;
  while (next < lines.length && (lines[next] ?? '').trim() === '') next += 1;
  if ((lines[next] ?? '').trim() !== '```text') return undefined;
  const end = lines.findIndex((line, index) => index > next && line.startsWith('```'));
  return lines.slice(next + 1, end);
}

/**
 * One command per line, except that a line ending in `\` goes on, and so does one that leaves
 * a compound command open (`for …; do`): bash itself says when the text is whole. Comment lines
 * between commands are prose, `# →` lines the output of the command before them.
 */
function commandsOf(lines: readonly string[], firstLine: number): Command[] {
  const commands: Command[] = [];
  let pending: string[] = [];
  let pendingLine = firstLine;
  lines.forEach((line, index) => {
    const shown = SHOWN_LINE.exec(line);
    if (pending.length === 0 && shown) {
      const last = commands.at(-1);
      if (!last) throw new Error(`line ${firstLine + index}: shown output before any command`);
      last.shown.push(shown[1] ?? '');
      return;
    }
    if (pending.length === 0 && (line.trim() === '' || line.trim().startsWith('#'))) return;
    if (pending.length === 0) pendingLine = firstLine + index;
    pending.push(line);
    if (line.endsWith('\\') || !isWhole(pending.join('\n'))) return;
    commands.push({
      text: pending.join('\n'),
      line: pendingLine,
      shown: pending.flatMap((part) => {
        const after = SHOWN_AFTER.exec(part);
        return after ? [after[1] ?? ''] : [];
      }),
    });
    pending = [];
  });
  if (pending.length > 0) throw new Error(`line ${pendingLine}: a command bash does not read as whole`);
  return commands;
}

function isWhole(text: string): boolean {
  return spawnSync('bash', ['-n'], { input: text, stdio: ['pipe', 'ignore', 'ignore'] }).status === 0;
}

/**
 * Where `shown` fails to match `output`, or undefined when it matches: every shown line, in
 * order, must be the whole of some output line (each after the one before), where
 * - `…` stands for any text, or a whole line of it for any lines;
 * - a number written with a decimal point (0.65, 1.5e-3) stands for any number, since figures
 *   measured or computed in floating point move between runs and machines; whole numbers
 *   (counts, status codes) must be equal;
 * - runs of spaces count as one, and so do runs of a table's `─`, as column widths follow
 *   their contents.
 */
export function mismatch(shown: readonly string[], output: string): string | undefined {
  const lines = output.split('\n').map(normalized);
  let at = 0;
  for (const expected of shown.map(normalized)) {
    if (expected === '…' || expected === '') continue;
    const pattern = linePattern(expected);
    const found = lines.findIndex((line, index) => index >= at && pattern.test(line));
    if (found === -1) return `no line of the output${at > 0 ? ' after the last one matched' : ''} is "${expected}"`;
    at = found + 1;
  }
  return undefined;
}

function normalized(line: string): string {
  return line.replace(/─+/g, '─').replace(/\s+/g, ' ').trim();
}

const NUMBER = String.raw`-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?`;

function linePattern(expected: string): RegExp {
  const parts = expected.split(/(…|-?\d+\.\d+(?:[eE][-+]?\d+)?)/).map((part, index) => {
    if (index % 2 === 0) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return part === '…' ? '.*?' : NUMBER;
  });
  return new RegExp(`^${parts.join('')}$`);
}
