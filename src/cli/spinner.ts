import ora, { type Ora } from 'ora';

/** What the spinner needs to know of the stream it draws on (process.stderr, or a test's). */
export type SpinnerStream = NodeJS.WritableStream & { readonly isTTY?: boolean; readonly columns?: number };

/**
 * Whether a spinner can be redrawn in place on `stream`: a terminal that knows its width. ora
 * counts the lines it must erase as the text's width over the columns, so a pseudo-terminal
 * reporting 0 columns makes that Infinity and it erased without end (27 MB of escape codes in
 * 2 s, issue #16). A zero or unknown width is treated as no terminal at all.
 */
export function canRedraw(stream: SpinnerStream): boolean {
  return stream.isTTY === true && (stream.columns ?? 0) > 0;
}

/** A started spinner; silent where it cannot be redrawn, so scripts and CI logs get only the results. */
export function startSpinner(text: string, stream: SpinnerStream = process.stderr): Ora {
  return ora({ stream, isSilent: !canRedraw(stream) }).start(text);
}
