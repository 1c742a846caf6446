import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { formatDoctorReport, wrap } from '../../src/cli/doctor.js';
import { examineMachine, type DoctorReport } from '../../src/runtime/doctor.js';
import { FAKE_NVIDIA_SMI, fakeNvidiaSmiPrints } from '../fixtures/nvidia-smi.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

/** Characters, not bytes: the table's borders are box-drawing characters. */
const widest = (text: string): number => Math.max(...text.split('\n').map((line) => [...line].length));

test('doctor on a terminal of 80 columns: nothing leaks to stderr, no line is wider than the terminal', async () => {
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(process.execPath, [BIN, 'doctor'], { env: { ...process.env, COLUMNS: '80' } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    ),
  );
  assert.equal(run.code, 0);
  // Dawn's "Couldn't load Vulkan" (written by native code on a machine without a GPU) is part
  // of WebGPU's reason, not the terminal's noise.
  assert.equal(run.stderr, '');
  assert.ok(widest(run.stdout) <= 80, run.stdout);
  assert.match(run.stdout, /│ webgpu/);
});

test('an accelerator that fails says why, with what its native code wrote to stderr', async () => {
  const report = await examineMachine({ nvidiaSmi: '/nonexistent/nvidia-smi' });
  const webgpu = report.providers.find((provider) => provider.name === 'webgpu');
  assert.equal(report.providers.find((provider) => provider.name === 'cpu')?.works, true);
  assert.deepEqual(report.gpus, { kind: 'missing', error: '/nonexistent/nvidia-smi not found' });
  // On a machine with a GPU and Vulkan, WebGPU works and there is nothing to check.
  if (webgpu && !webgpu.works) assert.match(webgpu.error ?? '', /WebGPU|Vulkan|adapter/);
});

test('doctor shows each GPU from nvidia-smi: utilisation, memory and power', async (t) => {
  fakeNvidiaSmiPrints(t, 'one-gpu.txt');
  const report = await examineMachine({ nvidiaSmi: FAKE_NVIDIA_SMI });
  const text = formatDoctorReport(report, 120);
  assert.match(text, /│ 0 +│ NVIDIA H200 │ 87 % +│ 40321 MiB \/ 143771 MiB │ 612 W │/);
});

const REPORT: DoctorReport = {
  batchserve: '0.1.0',
  node: 'v20.20.2',
  onnxruntime: '1.30.0',
  platform: 'linux-x64',
  cpu: { cores: 2, model: 'a CPU' },
  providers: [
    { name: 'cpu', device: 'cpu', bundled: true, works: true },
    {
      name: 'webgpu',
      device: 'webgpu',
      bundled: true,
      works: false,
      error: `onnxruntime cannot load the demo model on webgpu: Failed to get a WebGPU adapter ${'word '.repeat(60)}(stderr: Warning: Couldn't load Vulkan at operator() (/build/Release/_deps/dawn-src/src/dawn/native/vulkan/BackendVk.cpp:368))`,
    },
  ],
  gpus: { kind: 'failed', error: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." },
  vulkanAdapters: undefined,
};

test('the "why not" column wraps to the width, long paths included, and loses no word', () => {
  for (const width of [60, 80, 132]) {
    const text = formatDoctorReport(REPORT, width);
    assert.ok(widest(text) <= width, `${width}:\n${text}`);
    assert.match(text, /BackendVk\.cpp:368/);
    const cells = text
      .split('\n')
      .filter((line) => line.startsWith('│'))
      .map((line) => line.split('│').at(-2)?.trim() ?? '')
      .join(' ');
    assert.ok(cells.includes('word word word'));
  }
  assert.match(formatDoctorReport(REPORT, 80), /gpus \(nvidia-smi\): NVIDIA-SMI has failed/);
});

test('wrap breaks between words, and inside a word only when it alone is too wide', () => {
  assert.equal(wrap('aaa bbb ccc', 7), 'aaa bbb\nccc');
  assert.equal(wrap('a /very/long/path x', 6), 'a\n/very/\nlong/p\nath x');
  assert.equal(wrap('', 10), '');
});
