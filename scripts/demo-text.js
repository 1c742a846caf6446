// Text models end to end, from a fresh clone after `npm ci && npm run build`: write a text
// encoder and a decoder the way `optimum-cli export onnx` lays them out (a folder holding
// model.onnx and tokenizer.json), pack each with the same command a real export takes, serve
// both, call them with the official `openai` client (embeddings; a completion, whole and
// streamed), and bench the completions route. The two models are the test suite's generated
// ones (fixed tables, a 16-word vocabulary): their answers are exact and meaningless.
// Usage: npm run demo:text
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { decoderModel, textEncoderModel } from '../dist/test/fixtures/onnx-models.js';
import { TEXT_VOCAB, wordPieceTokenizer } from '../dist/test/fixtures/text-tokenizer.js';
import { waitForStartupUrls } from '../dist/src/server/startup-block.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'demo-out', 'text');
const bin = join(root, 'bin', 'batchserve.js');
const batchserve = (...args) => {
  const result = spawnSync(process.execPath, [bin, ...args], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`batchserve ${args[0]} exited ${result.status}`);
};

/** An export folder as Optimum writes one: model.onnx and tokenizer.json. */
async function exportFolder(name, model, tokenizer) {
  const folder = join(out, name);
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, 'model.onnx'), model);
  await writeFile(join(folder, 'tokenizer.json'), JSON.stringify(tokenizer));
  return folder;
}

console.log('== export (generated models, laid out as optimum-cli export onnx writes them)');
const encoder = await exportFolder('encoder', textEncoderModel(TEXT_VOCAB.length, 4), wordPieceTokenizer());
const decoder = await exportFolder(
  'decoder',
  decoderModel(TEXT_VOCAB.length),
  wordPieceTokenizer({ specialTokens: false }),
);
console.log(`${encoder}/{model.onnx,tokenizer.json}\n${decoder}/{model.onnx,tokenizer.json}\n`);

console.log('== pack');
for (const [name, folder, handler, config] of [
  ['encoder', encoder, 'text-embedding', 'examples/text-embedding/model-config.yaml'],
  ['writer', decoder, 'text-generation', 'examples/text-generation/model-config.yaml'],
]) {
  batchserve(
    ...['model-archive', 'pack', '--model-name', name, '--serialized-file', join(folder, 'model.onnx')],
    ...['--handler', handler, '--config-file', join(root, config), '--extra-files', join(folder, 'tokenizer.json')],
    ...['--export-path', out, '--force'],
  );
}

console.log('\n== serve');
// The bin itself, as npm links it: its shebang starts Node with the server's V8 flag.
const server = spawn(
  bin,
  [
    ...['serve', '--models', `encoder=${join(out, 'encoder.mar')}`, `writer=${join(out, 'writer.mar')}`],
    ...['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0'],
    ...['--key-file', join(out, 'batchserve.key'), '--log-level', 'warn'],
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
try {
  const urls = await waitForStartupUrls(server);
  console.log(`inference API at ${urls.inference}; the openai client's baseURL is ${urls.inference}/v1\n`);
  const client = new OpenAI({ baseURL: `${urls.inference}/v1`, apiKey: 'not-needed' });

  console.log('== client.models.list()');
  console.log((await client.models.list()).data.map((model) => model.id).join(', '));

  console.log("\n== client.embeddings.create({ model: 'encoder', input: ['the cat runs', 'hello, world.'] })");
  const embeddings = await client.embeddings.create({ model: 'encoder', input: ['the cat runs', 'hello, world.'] });
  for (const item of embeddings.data)
    console.log(`  ${item.index}: [${item.embedding.map((v) => v.toFixed(3)).join(', ')}]`);
  console.log(`  usage: ${JSON.stringify(embeddings.usage)}`);

  console.log("\n== client.completions.create({ model: 'writer', prompt: 'the cat', max_tokens: 12, temperature: 0 })");
  const completion = await client.completions.create({
    model: 'writer',
    prompt: 'the cat',
    max_tokens: 12,
    temperature: 0,
  });
  console.log(
    `  ${JSON.stringify(completion.choices[0]?.text)} (${completion.choices[0]?.finish_reason}); usage ${JSON.stringify(completion.usage)}`,
  );

  console.log('\n== the same, streamed (stream: true): one chunk a token');
  const stream = await client.completions.create({
    model: 'writer',
    prompt: 'the cat',
    max_tokens: 12,
    temperature: 0,
    stream: true,
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk.choices[0]?.text ?? '');
  console.log(`  ${chunks.map((chunk) => JSON.stringify(chunk)).join(' ')}`);

  console.log('\n== bench --openai completions (concurrency 1, 8; max_tokens 8-64; 2 s a level)');
  batchserve(
    ...['bench', '--openai', 'completions', '--url', urls.inference, '--model', 'writer'],
    ...['--concurrency', '1,8', '--max-tokens', '8-64', '--prompt', 'the cat', '--warmup', '500ms', '--duration', '2s'],
  );
} finally {
  server.kill('SIGTERM');
}
