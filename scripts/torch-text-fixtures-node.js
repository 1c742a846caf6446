// The Node side of scripts/torch-text-fixtures.py: the tokenizer and the runtime the server uses.
//   node scripts/torch-text-fixtures-node.js encode TOKENIZER_JSON   < texts.json  > ids.json
//   node scripts/torch-text-fixtures-node.js check FIXTURE_DIR
// `check` replays a fixture's answers.json: the tokenizer gives the recorded ids, and
// onnxruntime-node, fed each prompt alone (an empty cache first, then its present back as
// past), answers torch's greedy ids; an encoder's embeddings match torch's, alone and padded
// into one batch. A mismatch exits 1.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import ort from 'onnxruntime-node';

const [command, path] = process.argv.slice(2);
if (command === 'encode') encode(path);
else if (command === 'check') await check(path);
else throw new Error(`usage: encode TOKENIZER_JSON < texts.json | check FIXTURE_DIR (got ${command})`);

function tokenizerAt(file) {
  return new Tokenizer(JSON.parse(readFileSync(file, 'utf8')), {});
}

function encode(file) {
  const tokenizer = tokenizerAt(file);
  const texts = JSON.parse(readFileSync(0, 'utf8'));
  process.stdout.write(JSON.stringify(texts.map((text) => tokenizer.encode(text).ids)));
}

function int64(values, dims) {
  return new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
}

async function check(dir) {
  const answers = JSON.parse(readFileSync(join(dir, 'answers.json'), 'utf8'));
  const tokenizer = tokenizerAt(join(dir, 'tokenizer.json'));
  const session = await ort.InferenceSession.create(join(dir, 'model.onnx'));
  const problems = [];
  for (const item of answers.texts ?? answers.prompts) {
    const ids = tokenizer.encode(item.text).ids;
    if (JSON.stringify(ids) !== JSON.stringify(item.ids)) problems.push(`${item.text}: ids ${ids} vs ${item.ids}`);
  }
  if (answers.texts) problems.push(...(await checkEncoder(session, answers.texts)));
  else {
    // A merged decoder is also fed the dummy past of one position older Optimum sent.
    const firstPasts = session.inputNames.includes('use_cache_branch') ? [0, 1] : [0];
    for (const firstPast of firstPasts) {
      for (const prompt of answers.prompts) {
        const greedy = await greedyAlone(session, prompt.ids, answers, firstPast);
        if (JSON.stringify(greedy) !== JSON.stringify(prompt.greedy)) {
          problems.push(`${prompt.text} (first past ${firstPast}): ${greedy} vs torch's ${prompt.greedy}`);
        }
      }
    }
  }
  if (problems.length > 0) {
    console.log(`${dir}: onnxruntime-node disagrees with torch\n  ${problems.join('\n  ')}`);
    process.exitCode = 1;
  } else {
    const count = (answers.texts ?? answers.prompts).length;
    console.log(`${dir}: onnxruntime-node agrees with torch on all ${count}`);
  }
}

function pastShape(session, name) {
  const meta = session.inputMetadata.find((input) => input.name === name);
  return { heads: meta.shape[1], headDim: meta.shape[3] };
}

async function greedyAlone(session, promptIds, { eos_token_id: eos, max_new_tokens: maxNew }, firstPast) {
  const pastNames = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  const { heads, headDim } = pastShape(session, pastNames[0]);
  let past = Object.fromEntries(
    pastNames.map((name) => [
      name,
      new ort.Tensor('float32', new Float32Array(heads * firstPast * headDim), [1, heads, firstPast, headDim]),
    ]),
  );
  let length = 0;
  let fed = promptIds;
  const answer = [];
  while (answer.length < maxNew) {
    const feeds = { ...past, input_ids: int64(fed, [1, fed.length]) };
    const total = length + fed.length;
    feeds.attention_mask = int64(new Array(total).fill(1), [1, total]);
    if (session.inputNames.includes('position_ids')) {
      feeds.position_ids = int64(
        fed.map((_, index) => length + index),
        [1, fed.length],
      );
    }
    if (session.inputNames.includes('use_cache_branch')) {
      feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(length > 0 ? 1 : 0), [1]);
    }
    const outputs = await session.run(feeds);
    const vocab = outputs.logits.dims[2];
    const last = outputs.logits.data.subarray((fed.length - 1) * vocab, fed.length * vocab);
    let token = 0;
    for (let id = 1; id < vocab; id++) if (last[id] > last[token]) token = id;
    answer.push(token);
    if (token === eos) break;
    past = Object.fromEntries(pastNames.map((name) => [name, outputs[name.replace('past_key_values', 'present')]]));
    length = total;
    fed = [token];
  }
  return answer;
}

async function checkEncoder(session, texts) {
  const problems = [];
  const width = Math.max(...texts.map((item) => item.ids.length));
  const embed = async (rows, rowWidth) => {
    const ids = rows.flatMap((row) => [...row, ...new Array(rowWidth - row.length).fill(0)]);
    const mask = rows.flatMap((row) => [...row.map(() => 1), ...new Array(rowWidth - row.length).fill(0)]);
    const dims = [rows.length, rowWidth];
    const { last_hidden_state: hidden } = await session.run({
      input_ids: int64(ids, dims),
      attention_mask: int64(mask, dims),
      token_type_ids: int64(new Array(ids.length).fill(0), dims),
    });
    const size = hidden.dims[2];
    return rows.map((row, r) => {
      const mean = new Array(size).fill(0);
      for (let t = 0; t < row.length; t++) {
        for (let d = 0; d < size; d++) mean[d] += hidden.data[(r * rowWidth + t) * size + d] / row.length;
      }
      const norm = Math.hypot(...mean);
      return mean.map((value) => value / norm);
    });
  };
  const batched = await embed(
    texts.map((item) => item.ids),
    width,
  );
  for (const [index, item] of texts.entries()) {
    const [alone] = await embed([item.ids], item.ids.length);
    for (const [how, embedding] of [
      ['alone', alone],
      ['padded', batched[index]],
    ]) {
      const worst = Math.max(...embedding.map((value, d) => Math.abs(value - item.embedding[d])));
      if (!(worst < 1e-5)) problems.push(`${item.text} (${how}): differs from torch's by ${worst}`);
    }
  }
  return problems;
}
