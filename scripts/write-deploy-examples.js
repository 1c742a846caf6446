// `npm run deploy:examples`: rewrites every manifest in deploy/ with the command that
// src/deploy/examples.ts gives for it, so the files are always the generator's output. The
// YAML is taken from stdout (what the test compares the files with), since `deploy k8s-job`'s
// --output names the scores' location rather than the YAML's file.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEPLOY_EXAMPLES } from '../dist/src/deploy/examples.js';

const root = fileURLToPath(new URL('../', import.meta.url));
const bin = join(root, 'bin/batchserve.js');
for (const example of DEPLOY_EXAMPLES) {
  const output = join(root, example.file);
  mkdirSync(dirname(output), { recursive: true });
  const yaml = execFileSync(process.execPath, [bin, ...example.args], { stdio: ['ignore', 'pipe', 'inherit'] });
  writeFileSync(output, yaml);
  console.log(`wrote ${example.file}`);
}
