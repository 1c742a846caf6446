import { spawn } from 'node:child_process';
import { writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEMO_MODEL_PATH } from './demo-model.js';
import { createSession } from './session.js';

/** Whether a device opened the demo model, and the error when not. */
export interface ProbeResult {
  readonly device: string;
  readonly works: boolean;
  readonly error?: string;
}

/** Written to stderr before each device's probe, so what native code writes after it is that device's. */
const MARKER = '\n@@batchserve-probe ';
const PROBE_TIMEOUT_MS = 60_000;

/** Opens and releases a real session on `device`: the only reliable test of an execution provider. */
export async function probeDevice(device: string): Promise<ProbeResult> {
  try {
    const session = await createSession(
      DEMO_MODEL_PATH,
      { runtime: { intra_op_threads: 1, inter_op_threads: 1, graph_optimization_level: 'basic' }, device },
      'the demo model',
    );
    await session.release();
    return { device, works: true };
  } catch (error) {
    return { device, works: false, error: (error as Error).message };
  }
}

/**
 * Probes accelerators in a child process whose stderr is captured: Dawn (WebGPU) and the CUDA
 * libraries write warnings straight to file descriptor 2 from native code, which no
 * JavaScript hook can catch, and which belong in the reason a device does not work rather
 * than on the user's terminal. A child that crashes fails every device it had not answered.
 */
export function probeDevicesApart(devices: readonly string[]): Promise<ProbeResult[]> {
  if (devices.length === 0) return Promise.resolve([]);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), ...devices], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: PROBE_TIMEOUT_MS,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const finish = (failure: string | undefined): void => {
      const written = stderrByDevice(stderr);
      const answered = parseResults(stdout);
      resolve(
        devices.map((device) => {
          const result = answered.get(device) ?? {
            device,
            works: false,
            error: `the probe process ${failure ?? 'gave no answer'}`,
          };
          const noise = written.get(device);
          if (result.works || !noise) return result;
          return { ...result, error: `${result.error ?? ''} (stderr: ${noise})` };
        }),
      );
    };
    child.on('error', (error) => finish(`could not start: ${error.message}`));
    child.on('close', (code, signal) => finish(signal ? `was killed by ${signal}` : `exited with code ${code}`));
  });
}

/** The child's stderr cut at the markers, each part squeezed onto one line. */
function stderrByDevice(stderr: string): Map<string, string> {
  const parts = new Map<string, string>();
  for (const part of stderr.split(MARKER).slice(1)) {
    const newline = part.indexOf('\n');
    const device = newline < 0 ? part : part.slice(0, newline);
    const text = (newline < 0 ? '' : part.slice(newline + 1)).replace(/\s+/g, ' ').trim();
    if (text) parts.set(device, text);
  }
  return parts;
}

function parseResults(stdout: string): Map<string, ProbeResult> {
  const results = new Map<string, ProbeResult>();
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const result = JSON.parse(line) as ProbeResult;
    results.set(result.device, result);
  }
  return results;
}

/** The child: one JSON line per device on stdout, a marker on stderr before each. */
async function probeInChild(devices: readonly string[]): Promise<void> {
  for (const device of devices) {
    // Synchronous, so the marker lands on fd 2 before anything native code writes there next.
    writeSync(2, `${MARKER}${device}\n`);
    const result = await probeDevice(device);
    writeSync(1, `${JSON.stringify(result)}\n`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await probeInChild(process.argv.slice(2));
