import { readFile } from 'node:fs/promises';
import { TlsFileError } from './errors.js';

/**
 * What a client trusts and presents over TLS, as PEM text (bench's and the management
 * commands' `--tls-ca`, `--tls-cert`, `--tls-key`), in the shape undici's `connect`,
 * `tls.connect` and `http2.connect` take. Plain strings, so a bench worker thread gets a copy.
 */
export interface ClientTls {
  /** CA certificates to trust instead of the system's. */
  readonly ca?: string;
  /** A client certificate (mutual TLS) and its key. */
  readonly cert?: string;
  readonly key?: string;
}

const PEM_BLOCKS: Readonly<Record<PemKind, RegExp>> = {
  certificate: /-----BEGIN CERTIFICATE-----/,
  'private key': /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/,
};

export type PemKind = 'certificate' | 'private key';

/**
 * A PEM file's bytes; TlsFileError naming the file when it cannot be read or holds no PEM
 * block of the kind (a DER file, a key given as a certificate). `what` names it in the message.
 */
export async function readPemFile(file: string, kind: PemKind, what: string = kind): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new TlsFileError(`TLS ${what} ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  if (!PEM_BLOCKS[kind].test(bytes.toString('latin1'))) {
    const block = kind === 'private key' ? 'PRIVATE KEY' : 'CERTIFICATE';
    throw new TlsFileError(`TLS ${what} ${file} is not PEM (no "-----BEGIN ${block}-----" block)`);
  }
  return bytes;
}
