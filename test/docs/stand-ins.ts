import { readFile, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { affineModel, tinyImageClassifier } from '../fixtures/onnx-models.js';
import { rawZip } from '../fixtures/raw-zip.js';

// Files a reader of the docs brings and a clone has not, written for the docs test by a
// page's hidden `<!-- docs-test: before … -->` commands (docs/testing.md):
//   node dist/test/docs/stand-ins.js affine FILE.onnx OFFSET
//     a small model, x FP32 [batch, 4] → y = 2x + OFFSET
//   node dist/test/docs/stand-ins.js image-classifier FILE.onnx
//     an image classifier as `model-archive init --template image-classifier` expects one:
//     input FP32 [batch, 3, 224, 224], two classes
//   node dist/test/docs/stand-ins.js npy FILE.npy
//     rows of 4 FP32 values, [2, 4], as numpy.save writes them
//   node dist/test/docs/stand-ins.js torchserve-mar OUT.mar MODEL.onnx [EXTRA_FILE…]
//     an archive as torch-model-archiver 0.12 lays one out, with TorchServe's built-in
//     image_classifier handler and a model-config.yaml of TorchServe's keys

const [what, out, ...rest] = process.argv.slice(2);
if (what === 'affine' && out) {
  await writeFile(out, affineModel([4], 'batch', Number(rest[0] ?? 1)));
} else if (what === 'image-classifier' && out) {
  await writeFile(out, tinyImageClassifier(224, 224));
} else if (what === 'npy' && out) {
  const rows = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]);
  // NPY 1.0: magic, version, header length, then a dict padded with spaces to a 64-byte boundary.
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }";
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 'latin1');
  prefix.writeUInt8(1, 6);
  prefix.writeUInt16LE(header.length, 8);
  await writeFile(out, Buffer.concat([prefix, Buffer.from(header, 'latin1'), Buffer.from(rows.buffer)]));
} else if (what === 'torchserve-mar' && out && rest[0]) {
  const [model, ...extras] = rest as [string, ...string[]];
  const name = basename(out, '.mar');
  const manifest = {
    createdOn: '04/12/2026 10:00:00',
    runtime: 'python',
    model: {
      modelName: name,
      serializedFile: basename(model),
      handler: 'image_classifier',
      modelVersion: '1.0',
      configFile: 'model-config.yaml',
    },
    archiverVersion: '0.12.0',
  };
  const file = async (path: string): Promise<{ name: string; data: Buffer; method: 'deflate' }> => ({
    name: basename(path),
    data: await readFile(path),
    method: 'deflate',
  });
  await writeFile(
    out,
    rawZip([
      await file(model),
      ...(await Promise.all(extras.map(file))),
      {
        name: 'model-config.yaml',
        data: 'minWorkers: 1\nmaxWorkers: 2\nbatchSize: 8\nmaxBatchDelay: 5\nresponseTimeout: 120\n',
      },
      { name: 'MAR-INF/MANIFEST.json', data: JSON.stringify(manifest, null, 2) },
    ]),
  );
} else {
  throw new Error(
    'usage: stand-ins.js affine FILE.onnx OFFSET | image-classifier FILE.onnx | npy FILE.npy | torchserve-mar OUT.mar MODEL.onnx [EXTRA…]',
  );
}
