// The simulated accelerator's model: a [batch, 16] FP32 identity graph, whose passes the `sim`
// device replaces with exact waits (docs/serving.md, "The simulated accelerator"). Used by
// bench:accelerator, trace-cycle.js and `npm run demo`.
// Usage: node benchmarks/identity-model.js OUT.onnx
import { writeFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

/** Writes the identity model to `path`. */
export async function writeIdentityModel(path) {
  const tensor = (name) => ({
    name,
    type: {
      tensorType: {
        elemType: onnx.TensorProto.DataType.FLOAT,
        shape: { dim: [{ dimParam: 'batch' }, { dimValue: 16 }] },
      },
    },
  });
  const bytes = onnx.ModelProto.encode({
    irVersion: 8,
    producerName: 'batchserve-benchmarks',
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'identity',
      node: [{ opType: 'Identity', input: ['x'], output: ['y'] }],
      input: [tensor('x')],
      output: [tensor('y')],
    },
  }).finish();
  await writeFile(path, bytes);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await writeIdentityModel(process.argv[2]);
