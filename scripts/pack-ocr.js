// Packs the OCR pipeline's four archives (ocr-det, ocr-cls, ocr-rec, ocr) into a folder, with
// the same code as the demo, the end-to-end test and the benchmark (examples/ocr/pipeline/pack.ts).
// Usage: npm run build && node scripts/pack-ocr.js [DIR]   (default demo-out/ocr)
import { packOcrPipeline, servedModels } from '../dist/examples/ocr/pipeline/pack.js';

const archives = await packOcrPipeline(process.argv[2] ?? 'demo-out/ocr');
console.log(`batchserve serve --models ${servedModels(archives).join(' ')}`);
