import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createServer as createHttpServer, type RequestListener, type Server, type ServerOptions } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { ServerCredentials } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { readPemFile } from '../core/client-tls.js';
import { BatchserveError, TlsFileError } from '../core/errors.js';
import type { ApiName, TlsConfig } from './server-config.js';

/** TLS 1.0 and 1.1 are refused, whatever Node's own default (`--tls-min-v1.0`) says. */
const MIN_VERSION = 'TLSv1.2';

/** The PEM files of `tls:`, read and checked: the certificate, its key and the client CAs. */
interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly clientCa: Buffer | undefined;
  readonly certificate: X509Certificate;
}

/**
 * The server's certificates, shared by every port: read and checked at start, and read again
 * by `reload()` (SIGHUP). A reload hands each port a new secure context, which new connections
 * get; open ones keep the handshake they made and are never dropped. A reload whose files do
 * not check changes nothing.
 */
export class ServerTls {
  readonly #config: TlsConfig;
  #files: TlsFiles;
  readonly #ports: { api: ApiName; apply: (context: SecureContextOptions) => void }[] = [];

  private constructor(config: TlsConfig, files: TlsFiles) {
    this.#config = config;
    this.#files = files;
  }

  /** Throws TlsFileError naming the file when one cannot be used. */
  static async open(config: TlsConfig): Promise<ServerTls> {
    return new ServerTls(config, await readTlsFiles(config));
  }

  get config(): TlsConfig {
    return this.#config;
  }

  /** The certificate served now. */
  get certificate(): X509Certificate {
    return this.#files.certificate;
  }

  requiresClientCertificate(api: ApiName): boolean {
    return this.#config.client_auth.includes(api);
  }

  /** An HTTPS server for `api`'s port, whose certificates follow reloads. */
  createHttpsServer(api: ApiName, options: ServerOptions, listener: RequestListener): Server {
    const clientAuth = this.requiresClientCertificate(api);
    const server = createHttpsServer(
      { ...options, ...this.#context(api), requestCert: clientAuth, rejectUnauthorized: clientAuth },
      listener,
    );
    this.#ports.push({ api, apply: (context) => server.setSecureContext(context) });
    return server;
  }

  /**
   * Credentials for the gRPC port. grpc-js hands each update of a ServerCredentials' context
   * options to its HTTP/2 server's `setSecureContext`, as `createHttpsServer`'s servers get
   * theirs: HTTP/2 connections already open (a channel keeps one for its life) go on with the
   * certificate they were made with.
   */
  grpcCredentials(): ServerCredentials {
    const clientAuth = this.requiresClientCertificate('grpc');
    const credentials = new ReloadableServerCredentials(
      { requestCert: clientAuth, rejectUnauthorized: clientAuth },
      this.#context('grpc'),
    );
    this.#ports.push({ api: 'grpc', apply: (context) => credentials.update(context) });
    return credentials;
  }

  /** Reads the files again and gives every port the new context; throws (changing nothing) when they do not check. */
  async reload(): Promise<void> {
    this.#files = await readTlsFiles(this.#config);
    for (const { api, apply } of this.#ports) apply(this.#context(api));
  }

  #context(api: ApiName): SecureContextOptions {
    const { cert, key, clientCa } = this.#files;
    return {
      cert,
      key,
      minVersion: MIN_VERSION,
      ...(clientCa && this.requiresClientCertificate(api) ? { ca: clientCa } : {}),
    };
  }
}

/** grpc-js's own credentials (createSsl) cannot be given new files; this subclass can. */
class ReloadableServerCredentials extends ServerCredentials {
  update(context: SecureContextOptions): void {
    this.updateSecureContextOptions(context);
  }

  _equals(other: ServerCredentials): boolean {
    return other === this;
  }
}

/** A SIGHUP's reload, logged: what is served now, or why the certificates in use stay. */
export async function reloadTls(tls: ServerTls | undefined, logger: Logger): Promise<boolean> {
  if (!tls) return false;
  try {
    await tls.reload();
  } catch (error) {
    const code = error instanceof BatchserveError ? error.code : undefined;
    logger.error({ code, err: (error as Error).message }, 'TLS reload failed: the certificates in use stay');
    return false;
  }
  const { subject, serialNumber, validTo } = tls.certificate;
  logger.info(
    { cert: tls.config.cert, subject, serial: serialNumber, validTo },
    'TLS certificates reloaded: new connections get them',
  );
  return true;
}

/** An HTTP server, or an HTTPS one when `tls` is given. */
export function createApiServer(
  api: ApiName,
  tls: ServerTls | undefined,
  options: ServerOptions,
  listener: RequestListener,
): Server {
  return tls ? tls.createHttpsServer(api, options, listener) : createHttpServer(options, listener);
}

async function readTlsFiles(config: TlsConfig): Promise<TlsFiles> {
  const [cert, key, clientCa] = await Promise.all([
    readPemFile(config.cert, 'certificate'),
    readPemFile(config.key, 'private key'),
    config.client_ca === undefined ? undefined : readPemFile(config.client_ca, 'certificate', 'client CA'),
  ]);
  const certificate = parse(config.cert, 'certificate', () => new X509Certificate(cert));
  // OpenSSL 3 says only "interrupted or cancelled" of an encrypted key read without its passphrase.
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(key.toString('latin1'))) {
    throw new TlsFileError(
      `TLS private key ${config.key} is encrypted: give it decrypted (openssl pkey -in ${config.key} -out key.pem)`,
    );
  }
  const privateKey = parse(config.key, 'private key', () => createPrivateKey(key));
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new TlsFileError(`TLS private key ${config.key} is not the key of the certificate ${config.cert}`);
  }
  const caFile = config.client_ca;
  if (clientCa !== undefined && caFile !== undefined) {
    parse(caFile, 'client CA', () => createSecureContext({ ca: clientCa }));
  }
  parse(config.cert, 'certificate', () => createSecureContext({ cert, key, minVersion: MIN_VERSION }));
  return { cert, key, clientCa, certificate };
}

function parse<T>(file: string, what: string, read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw new TlsFileError(`TLS ${what} ${file} cannot be used: ${(error as Error).message}`);
  }
}
