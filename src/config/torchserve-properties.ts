import { basename } from 'node:path';
import { UsageError } from '../core/errors.js';

/**
 * Java's .properties as TorchServe's config.properties uses it: `key=value` or `key: value`
 * lines, `#` and `!` comments, a trailing backslash continuing a line (its next line's leading
 * blanks dropped).
 */
export function parseProperties(text: string): Map<string, string> {
  const properties = new Map<string, string>();
  const lines = text.split(/\r?\n/);
  for (let index = 0; index < lines.length; index++) {
    let line = (lines[index] as string).trimStart();
    if (line === '' || line.startsWith('#') || line.startsWith('!')) continue;
    while (line.endsWith('\\') && index + 1 < lines.length) {
      line = line.slice(0, -1) + (lines[++index] as string).trimStart();
    }
    const at = line.search(/[=:]/);
    const key = (at < 0 ? line : line.slice(0, at)).trim();
    properties.set(key, at < 0 ? '' : line.slice(at + 1).trim());
  }
  return properties;
}

export interface PropertiesReading {
  /** server.yaml keys, as a server.yaml would hold them. */
  readonly config: Record<string, unknown>;
  /** One line a key that was not used, or not all of it. */
  readonly warnings: string[];
}

/** Keys TorchServe has whose work batchserve does elsewhere, and where. */
const ELSEWHERE: Readonly<Record<string, string>> = {
  default_workers_per_model: "each archive's instances in its model-config.yaml (or PUT /models/{m}?min_worker=)",
  models:
    "each archive's max_batch_size, dynamic_batching.max_queue_delay and instances in its model-config.yaml (or POST /models?batch_size=&max_batch_delay=&initial_workers=)",
  job_queue_size: "each archive's dynamic_batching.max_queue_size",
  number_of_gpu: "each archive's instances device, or serve --device",
  grpc_management_port: 'no gRPC management API: the REST management port serves it',
};

function address(value: string, key: string): { host: string; port: number } {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(
      `config.properties: ${key}: expected an address such as http://127.0.0.1:8080, got "${value}"`,
    );
  }
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port };
}

/**
 * Maps TorchServe's config.properties onto server.yaml: the three addresses (batchserve binds
 * every API to one host), the gRPC inference port, model_store, load_models, max_request_size
 * token authorization and TLS (certificate_file, private_key_file on https addresses). A key
 * batchserve does elsewhere is named with where; any other key
 * is named as unused.
 */
export function serverConfigOfProperties(properties: ReadonlyMap<string, string>): PropertiesReading {
  const config: Record<string, unknown> = {};
  const warnings: string[] = [];
  const auth: Record<string, unknown> = {};
  const tls: Record<string, unknown> = {};
  const plain: string[] = [];
  const secure: string[] = [];
  let host: string | undefined;
  const bind = (key: string, portKey: string, value: string): void => {
    const parsed = address(value, key);
    (value.startsWith('https:') ? secure : plain).push(key);
    if (host !== undefined && parsed.host !== host) {
      warnings.push(`${key}: every API binds to one host, ${host} (the inference address's); not ${parsed.host}`);
    }
    host ??= parsed.host;
    config[portKey] = parsed.port;
  };
  const inference = properties.get('inference_address');
  if (inference !== undefined) bind('inference_address', 'port', inference);
  for (const [key, value] of properties) {
    switch (key) {
      case 'inference_address':
        break;
      case 'management_address':
        bind(key, 'management_port', value);
        break;
      case 'metrics_address':
        bind(key, 'metrics_port', value);
        break;
      case 'grpc_inference_port':
        config.grpc_port = Number(value);
        break;
      case 'model_store':
        config.model_store = value;
        break;
      case 'load_models':
        config.models = loadModels(value, properties.get('model_store'), warnings);
        break;
      case 'max_request_size':
        config.max_request_size = Number(value);
        break;
      case 'disable_token_authorization':
        if (value === 'true') auth.enabled = false;
        break;
      case 'enable_token_authorization':
        if (value === 'true') auth.mode = 'torchserve';
        break;
      case 'token_expiration_min':
        auth.key_expiration = `${Number(value) * 60}s`;
        break;
      case 'certificate_file':
        tls.cert = value;
        break;
      case 'private_key_file':
        tls.key = value;
        break;
      case 'keystore':
      case 'keystore_pass':
      case 'keystore_type':
        throw new UsageError(
          `config.properties: ${key}: a Java keystore is not read; convert it to PEM and give certificate_file and private_key_file (openssl pkcs12 -in keystore.p12 -nokeys -out cert.pem; openssl pkcs12 -in keystore.p12 -nocerts -nodes -out key.pem; a JKS keystore first: keytool -importkeystore -srckeystore keystore.jks -destkeystore keystore.p12 -deststoretype PKCS12)`,
        );
      default:
        warnings.push(
          Object.hasOwn(ELSEWHERE, key)
            ? `${key} is not read: it is ${ELSEWHERE[key]}`
            : `${key} is not used by batchserve`,
        );
    }
  }
  if (host !== undefined) config.host = host;
  tlsOfAddresses(tls, secure, plain, config, warnings);
  if (Object.keys(auth).length > 0) config.auth = auth;
  return { config, warnings };
}

/**
 * TorchServe serves TLS on its https:// addresses, with certificate_file and private_key_file.
 * batchserve's TLS covers every port or none: on with an https address, each http one named.
 */
function tlsOfAddresses(
  tls: Record<string, unknown>,
  secure: readonly string[],
  plain: readonly string[],
  config: Record<string, unknown>,
  warnings: string[],
): void {
  const files = Object.keys(tls).length > 0;
  if (secure.length === 0) {
    if (files) warnings.push('certificate_file and private_key_file are not used: no address is https');
    return;
  }
  if (!files) {
    throw new UsageError(
      `config.properties: ${secure.join(', ')} ${secure.length === 1 ? 'is' : 'are'} https: give certificate_file and private_key_file (PEM)`,
    );
  }
  config.tls = tls;
  for (const key of plain) warnings.push(`${key}: served over https too: TLS is on every port or none (gRPC too)`);
}

/** `all`, or `name=file.mar` / `file.mar` entries, files relative to the model store. */
function loadModels(value: string, store: string | undefined, warnings: string[]): string[] {
  if (value === 'all') return ['all'];
  if (value === '' || value === 'standalone') {
    if (value === 'standalone') warnings.push('load_models=standalone is not used: name the archives, or all');
    return [];
  }
  return value.split(',').map((entry) => {
    const trimmed = entry.trim();
    const at = trimmed.indexOf('=');
    const file = at < 0 ? trimmed : trimmed.slice(at + 1);
    const name = at < 0 ? basename(file).replace(/\.mar$/, '') : trimmed.slice(0, at);
    const path = store !== undefined && !file.startsWith('/') && !/^[a-z]+:\/\//.test(file) ? `${store}/${file}` : file;
    return `${name}=${path}`;
  });
}
