// What does decoding a ModelInfer request cost, and does the tensor data stay in the received
// buffer? proto-loader's own requestDeserialize (protobufjs decode, then toObject into plain
// objects) against the protobufjs types grpc-messages.ts serves with, on the demo model's
// input: [1, 3, 48, 192] FP32, sent as 110,592 raw bytes or as 27,648 fp32_contents. The last
// line of each adds decodeGrpcInferRequest (message → tensors) to the fast path.
// Prints µs per decode (the median of the rounds) and the ratio, measured in the same run.
// Usage: npm run build && node benchmarks/grpc-decode.js [--quick]
import { loadSync } from '@grpc/proto-loader';
import { performance } from 'node:perf_hooks';
import { INFERENCE_SERVICE, TRITON_PROTO_DIR, inferenceProtocol } from '../dist/src/protocol/grpc-messages.js';
import { decodeGrpcInferRequest } from '../dist/src/protocol/grpc-tensors.js';
import { benchFlags, environment, packageVersion } from './results.js';

const { quick } = benchFlags('grpc-decode');
const ROUNDS = quick ? 3 : 7;
const SHAPE = [1, 3, 48, 192];
const COUNT = SHAPE.reduce((a, b) => a * b, 1);

const protoLoader = loadSync('grpc_service.proto', {
  keepCase: true,
  longs: Number,
  defaults: true,
  oneofs: true,
  includeDirs: [TRITON_PROTO_DIR],
})[INFERENCE_SERVICE].ModelInfer;
const fast = inferenceProtocol().service.ModelInfer;

const values = Float32Array.from({ length: COUNT }, (_, i) => Math.sin(i));
const input = { name: 'x', datatype: 'FP32', shape: SHAPE };

/** The raw request; `pad` lengthens the model name, which moves the raw bytes by as many bytes. */
const rawRequest = (pad) =>
  fast.requestSerialize({
    model_name: `orientation${'_'.repeat(pad)}`,
    inputs: [input],
    raw_input_contents: [new Uint8Array(values.buffer)],
  });
const rawOffset = (bytes) => fast.requestDeserialize(bytes).raw_input_contents[0].byteOffset - bytes.byteOffset;
const asSent = rawRequest(0);
const aligned = [1, 2, 3].map(rawRequest).find((bytes) => rawOffset(bytes) % 4 === 0);
// Where the raw bytes land decides whether the tensor can be a view: where the header ends.
const requests = {
  [`raw_input_contents at offset ${rawOffset(asSent)}`]: asSent,
  ...(rawOffset(asSent) % 4 === 0 ? {} : { [`raw_input_contents at offset ${rawOffset(aligned)}`]: aligned }),
  fp32_contents: fast.requestSerialize({
    model_name: 'orientation',
    inputs: [{ ...input, contents: { fp32_contents: Array.from(values) } }],
  }),
};

/** Median µs per call of `decode(bytes)` over the rounds, after a warm-up round. */
function microseconds(decode, bytes, iterations) {
  let sink = 0;
  const perCall = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const started = performance.now();
    for (let i = 0; i < iterations; i++) sink += decode(bytes).inputs.length;
    if (round > 0) perCall.push(((performance.now() - started) * 1000) / iterations);
  }
  if (sink === 0) throw new Error('nothing decoded');
  return perCall.sort((a, b) => a - b)[Math.floor(perCall.length / 2)];
}

/** Whether the decoded message's raw input bytes, or the decoded tensor's data, lie in `bytes`. */
function sharing(result, bytes) {
  const raw = result.raw_input_contents?.[0];
  if (raw === undefined) return 'no raw bytes';
  return raw.buffer === bytes.buffer ? 'raw bytes are a view of the message' : 'raw bytes are a copy';
}

const env = environment();
console.log(`machine: ${env.cpu} × ${env.cpus}, ${env.platform} ${env.release}, load average ${env.loadAverage[0]}`);
console.log(
  `node ${env.node}, onnxruntime-node ${env.onnxruntime}, protobufjs ${packageVersion('protobufjs')} (grpc-messages), ` +
    `@grpc/proto-loader ${packageVersion('@grpc/proto-loader')} with protobufjs ` +
    `${packageVersion('@grpc/proto-loader/node_modules/protobufjs')}`,
);
console.log(`request: ${JSON.stringify(SHAPE)} FP32, ${ROUNDS} rounds${quick ? ' (--quick)' : ''}\n`);

for (const [form, bytes] of Object.entries(requests)) {
  const iterations = Math.max(1, Math.round((form.startsWith('raw') ? 20_000 : 100) / (quick ? 4 : 1)));
  const slow = microseconds(protoLoader.requestDeserialize, bytes, iterations);
  const ours = microseconds(fast.requestDeserialize, bytes, iterations);
  const decoded = decodeGrpcInferRequest(fast.requestDeserialize(bytes)).inputs.x.data;
  const tensors = microseconds(
    (message) => ({ inputs: Object.keys(decodeGrpcInferRequest(fast.requestDeserialize(message)).inputs) }),
    bytes,
    iterations,
  );
  console.log(`${form}: message of ${bytes.length.toLocaleString('en')} bytes`);
  console.log(
    `  proto-loader requestDeserialize     ${slow.toFixed(2).padStart(9)} µs   ${sharing(protoLoader.requestDeserialize(bytes), bytes)}`,
  );
  console.log(
    `  protobufjs types requestDeserialize ${ours.toFixed(2).padStart(9)} µs   ${sharing(fast.requestDeserialize(bytes), bytes)}`,
  );
  console.log(`  ratio (proto-loader / types)        ${(slow / ours).toFixed(2).padStart(9)} ×`);
  console.log(
    `  types + decodeGrpcInferRequest      ${tensors.toFixed(2).padStart(9)} µs   ` +
      `tensor data ${decoded.buffer === bytes.buffer ? 'is a view of the message' : 'is a copy'}\n`,
  );
}
