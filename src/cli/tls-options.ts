import type { Command } from 'commander';
import { readPemFile, type ClientTls } from '../core/client-tls.js';
import { UsageError } from '../core/errors.js';

/** `--tls-ca`, `--tls-cert`, `--tls-key`: the same three on every command that calls a server. */
export interface TlsClientOptions {
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** Adds the three flags; an https:// or grpcs:// URL needs none of them when a public CA signed the server. */
export function withTlsClient(command: Command): Command {
  return command
    .option(
      '--tls-ca <file.pem>',
      "the CAs (PEM) that signed the server's certificate, trusted in place of the system's",
    )
    .option('--tls-cert <file.pem>', 'a client certificate (PEM) for a server that asks for one (mutual TLS)')
    .option('--tls-key <file.pem>', "the client certificate's private key (PEM)");
}

/** The files the flags name, read and checked; undefined when none is given. */
export async function readTlsClient(options: TlsClientOptions): Promise<ClientTls | undefined> {
  if ((options.tlsCert === undefined) !== (options.tlsKey === undefined)) {
    throw new UsageError('--tls-cert and --tls-key go together: a client certificate and its key');
  }
  const [ca, cert, key] = await Promise.all([
    options.tlsCa === undefined ? undefined : readPemFile(options.tlsCa, 'certificate', 'CA'),
    options.tlsCert === undefined ? undefined : readPemFile(options.tlsCert, 'certificate'),
    options.tlsKey === undefined ? undefined : readPemFile(options.tlsKey, 'private key'),
  ]);
  if (!ca && !cert) return undefined;
  return {
    ...(ca ? { ca: ca.toString('utf8') } : {}),
    ...(cert && key ? { cert: cert.toString('utf8'), key: key.toString('utf8') } : {}),
  };
}
