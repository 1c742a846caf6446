import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { InferenceClient, type StreamAnswer } from '../fixtures/grpc-client.js';
import { call, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { packTextDecoder } from '../fixtures/text-archives.js';

/** The data events of a server-sent stream, parsed. */
function events(body: Buffer): Record<string, unknown>[] {
  return body
    .toString('utf8')
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => JSON.parse(event.slice(6)) as Record<string, unknown>);
}

/** One BYTES element as raw contents: its length (uint32 LE), then its bytes. */
function bytesElement(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32LE(bytes.length);
  return Buffer.concat([length, bytes]);
}

test("Triton's generate extension: /generate and /generate_stream (SSE) and gRPC ModelStreamInfer answer as /v1/completions does; bad parameters are 400s", async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`writer=${await packTextDecoder(dir)}`] });
  const base = `${server.urls.inference}/v2/models/writer`;
  const prompts = ['hello', 'the cat', 'dog'];
  const completions = await Promise.all(
    prompts.map(async (prompt) => {
      const answer = await call(`${server.urls.inference}/v1/completions`, {
        body: JSON.stringify({ model: 'writer', prompt, max_tokens: 8, temperature: 0 }),
      });
      return answer.body.choices[0].text as string;
    }),
  );
  assert.ok(completions.every((text) => text.length > 0));

  for (const [index, prompt] of prompts.entries()) {
    // Whole: parameters in `parameters`, or beside text_input as TensorRT-LLM's inputs are.
    const whole = await call(`${base}/generate`, {
      body: JSON.stringify({ text_input: prompt, parameters: { max_tokens: 8, temperature: 0 } }),
    });
    assert.equal(whole.status, 200, JSON.stringify(whole.body));
    assert.deepEqual(whole.body, { model_name: 'writer', model_version: '1', text_output: completions[index] });
    const pinned = await call(`${base}/versions/1/generate`, {
      body: JSON.stringify({ text_input: prompt, max_tokens: 8, temperature: 0 }),
    });
    assert.equal(pinned.body.text_output, completions[index]);

    // Streamed: one event a piece of text, which add up to the whole answer.
    const streamed = await call(`${base}/generate_stream`, {
      body: JSON.stringify({ text_input: prompt, parameters: { max_tokens: 8, temperature: 0, stream: true } }),
    });
    assert.equal(streamed.status, 200);
    assert.match(String(streamed.headers['content-type']), /^text\/event-stream/);
    const pieces = events(streamed.body as Buffer);
    // "hello" answers all eight tokens, never the end token.
    if (prompt === 'hello') assert.ok(pieces.length > 1, 'the answer streams in pieces');
    for (const piece of pieces) assert.deepEqual(Object.keys(piece), ['model_name', 'model_version', 'text_output']);
    assert.equal(pieces.map((piece) => piece.text_output).join(''), completions[index]);
  }

  // The prompt goes first when exclude_input_in_output is false.
  const echoed = await call(`${base}/generate`, {
    body: JSON.stringify({
      text_input: 'hello',
      parameters: { max_tokens: 8, temperature: 0, exclude_input_in_output: false },
    }),
  });
  assert.equal(echoed.body.text_output, `hello${completions[0]}`);

  for (const [what, route, body, says] of [
    ['no text_input', 'generate', { parameters: {} }, /"text_input" must be a string/],
    [
      'an unknown parameter',
      'generate',
      { text_input: 'hi', parameters: { beam_width: 2 } },
      /"beam_width" is not a generate parameter/,
    ],
    ['a hot temperature', 'generate_stream', { text_input: 'hi', parameters: { temperature: 9 } }, /"temperature"/],
    ['stream on generate', 'generate', { text_input: 'hi', parameters: { stream: true } }, /use generate_stream/],
    ['too many tokens', 'generate', { text_input: 'hi', max_tokens: 99 }, /max_new_tokens of 12/],
  ] as const) {
    const refused = await call(`${base}/${route}`, { body: JSON.stringify(body) });
    assert.equal(refused.status, 400, what);
    assert.match(refused.body.error, says, what);
    assert.equal(refused.body.code, 'BS_ERR_INFERENCE_INPUT', what);
  }
  const unknown = await call(`${server.urls.inference}/v2/models/nope/generate`, {
    body: JSON.stringify({ text_input: 'hi' }),
  });
  assert.equal(unknown.status, 404);

  // gRPC: decoupled answers, text_output pieces then an empty final response.
  const grpc = new InferenceClient(server.urls.grpc);
  t.after(() => grpc.close());
  const stream = grpc.stream();
  const answers: StreamAnswer[] = [];
  stream.on('data', (answer: StreamAnswer) => answers.push(answer));
  const request = (prompt: string, parameters: Record<string, unknown>, id: string): object => ({
    model_name: 'writer',
    id,
    inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
    raw_input_contents: [bytesElement(prompt)],
    parameters,
  });
  stream.write(request('hello', { max_tokens: { int64_param: 8 }, temperature: { double_param: 0 } }, 'a'));
  stream.write(request('the cat', { top_k: { int64_param: 3 } }, 'b'));
  stream.end();
  await once(stream, 'end');
  const refusal = answers.find((answer) => answer.error_message !== '');
  assert.match(refusal?.error_message ?? '', /"top_k" is not a generate parameter/);
  const mine = answers.filter((answer) => answer.error_message === '');
  assert.ok(mine.every((answer) => answer.infer_response.id === 'a' && answer.infer_response.model_name === 'writer'));
  const final = mine.at(-1)?.infer_response;
  assert.equal(final?.parameters?.triton_final_response?.bool_param, true);
  assert.equal(final?.outputs.length, 0);
  const texts = mine.slice(0, -1).map((answer) => {
    assert.equal(answer.infer_response.parameters.triton_final_response.bool_param, false);
    const [output] = answer.infer_response.outputs as { name: string; datatype: string; shape: unknown[] }[];
    assert.deepEqual([output?.name, output?.datatype, output?.shape.map(String)], ['text_output', 'BYTES', ['1']]);
    const raw = answer.infer_response.raw_output_contents[0] as Buffer;
    assert.equal(raw.readUInt32LE(0), raw.length - 4);
    return raw.subarray(4).toString('utf8');
  });
  assert.ok(texts.length > 1);
  assert.equal(texts.join(''), completions[0]);
});
