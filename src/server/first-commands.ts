import type { X509Certificate } from 'node:crypto';
import { resolve } from 'node:path';
import type { TensorSpec } from '../core/tensors.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { BatchServer } from './server.js';

/** Up to this many values a v2 request is written out in the command; past it, node writes them. */
const INLINE_VALUES = 16;

/**
 * Three commands to paste against the server just started, for its first model: readiness,
 * one inference, one bench. Keys are in place: the bench reads the management token from the
 * key file serve wrote, and in TorchServe's key mode the inference key is read from its file
 * (and no bench is offered, as bench sends no inference key). `batchserve` is how the bench
 * command is run from here: a name on PATH or the bin's path.
 */
export function firstCommands(server: BatchServer, batchserve: string): string[] {
  const model = server.repository.list()[0];
  if (model === undefined) return [];
  const { inference, management } = server.urls;
  // A self-signed certificate is its own trust anchor: the clients are told to trust it. A
  // CA-issued one is trusted through its CA, which the system trusts or its users name.
  const cert = server.tls && selfSigned(server.tls.certificate) ? resolve(server.tls.config.cert) : undefined;
  const curl = cert ? `curl --cacert ${quote(cert)}` : 'curl';
  const inferenceKey =
    server.keys?.guards('inference') && server.keyFile
      ? ` -H "Authorization: Bearer $(node -p ${quote(`require(${JSON.stringify(server.keyFile)}).inference.key`)})"`
      : '';
  const lines = [
    `${curl} -s ${inference}/v2/health/ready -o /dev/null -w '%{http_code}\\n'   # 200: every model ready`,
    `${inferenceCommand(model, curl, inference, inferenceKey)}   # one inference`,
  ];
  if (inferenceKey !== '') return lines;
  const tokenFile = server.token !== undefined && server.keyFile ? ` --token-file ${quote(server.keyFile)}` : '';
  // A management API that asks for a client certificate gets no sweep: serve knows no client's.
  const sweep =
    model.config.max_batch_size > 0 && !server.tls?.requiresClientCertificate('management')
      ? ` --management-url ${management}${tokenFile} --delays 0,auto`
      : '';
  const openai = textApi(model);
  if (openai === 'classifier') return lines;
  const load = openai ? ` --openai ${openai}` : sweep;
  lines.push(
    `${batchserve} bench --url ${inference}${cert ? ` --tls-ca ${quote(cert)}` : ''} --model ${quote(model.name)}${load} --concurrency 8 --window 500ms --duration 2s   # a short load sweep`,
  );
  return lines;
}

function textApi(model: LoadedModel): 'completions' | 'embeddings' | 'classifier' | undefined {
  const handler = model.manifest.model.handler;
  if (handler === 'text-generation') return 'completions';
  if (handler === 'text-embedding') return 'embeddings';
  if (handler === 'text-classifier') return 'classifier';
  return undefined;
}

/** A request the model's handler takes: OpenAI's body for text models, else a v2 request of zeros. */
function inferenceCommand(model: LoadedModel, curl: string, inference: string, key: string): string {
  const json = (path: string, body: unknown): string =>
    `${curl} -s ${inference}${path}${key} -H 'content-type: application/json' -d ${quote(JSON.stringify(body))}`;
  const name = model.name;
  switch (textApi(model)) {
    case 'completions':
      return json('/v1/completions', { model: name, prompt: 'Once upon a time', max_tokens: 8 });
    case 'embeddings':
      return json('/v1/embeddings', { model: name, input: 'a cat' });
    case 'classifier':
      return `${curl} -s ${inference}/predictions/${encodeURIComponent(name)}${key} -H 'content-type: text/plain' -d 'a short text'`;
    default:
      break;
  }
  const path = `/v2/models/${encodeURIComponent(name)}/infer`;
  const inputs = model.config.inputs.map((input) => ({ ...input, shape: input.shape.map((dim) => Math.max(dim, 1)) }));
  const count = inputs.reduce((sum, input) => sum + elements(input), 0);
  if (count <= INLINE_VALUES) {
    return json(path, {
      inputs: inputs.map((input) => ({ ...input, data: new Array(elements(input)).fill(zero(input)) })),
    });
  }
  // Too many values to read: node writes the same request of zeros.
  const tensors = inputs.map(
    (input) =>
      `{name: ${JSON.stringify(input.name)}, datatype: "${input.datatype}", shape: [${input.shape.join(', ')}], data: Array(${elements(input)}).fill(${JSON.stringify(zero(input))})}`,
  );
  const program = `process.stdout.write(JSON.stringify({inputs: [${tensors.join(', ')}]}))`;
  return `node -e ${quote(program)} | ${curl} -s ${inference}${path}${key} -H 'content-type: application/json' --data-binary @-`;
}

function selfSigned(certificate: X509Certificate): boolean {
  return certificate.checkIssued(certificate) && certificate.verify(certificate.publicKey);
}

function elements(input: TensorSpec): number {
  return input.shape.reduce((product, dim) => product * dim, 1);
}

function zero(input: TensorSpec): number | boolean | string {
  if (input.datatype === 'BOOL') return false;
  if (input.datatype === 'BYTES') return '';
  return 0;
}

/** One word for a POSIX shell. */
function quote(text: string): string {
  return /^[\w./:=@%+,-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}
