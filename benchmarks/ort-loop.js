// The plainest way to score rows with the demo model, the reference #39's oracle used: one
// onnxruntime-node session on one thread, the same [B, 3, 48, 192] tensor run back to back.
// Prints items per second. Run as a child, so its session does not share a process with the
// next measurement. Usage: node benchmarks/ort-loop.js MODEL.onnx BATCH SECONDS
import { InferenceSession, Tensor } from 'onnxruntime-node';

const [model, batchArg, secondsArg] = process.argv.slice(2);
const batch = Number(batchArg);
const session = await InferenceSession.create(model, {
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  executionMode: 'sequential',
});
const data = Float32Array.from({ length: batch * 3 * 48 * 192 }, () => Math.random() * 2 - 1);
const feeds = { [session.inputNames[0]]: new Tensor('float32', data, [batch, 3, 48, 192]) };
for (let warm = 0; warm < 5; warm++) await session.run(feeds);
const until = performance.now() + Number(secondsArg) * 1000;
const start = performance.now();
let runs = 0;
while (performance.now() < until) {
  await session.run(feeds);
  runs++;
}
console.log(String((runs * batch * 1000) / (performance.now() - start)));
