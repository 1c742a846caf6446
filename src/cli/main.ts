import { Command, CommanderError } from 'commander';
import { BatchserveError } from '../core/errors.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { registerModelArchive } from './model-archive.js';
import { registerServe } from './serve-command.js';
import { registerBench } from './bench-command.js';
import { registerCanary } from './canary-command.js';
import { registerTraffic } from './traffic-command.js';
import { registerPredict } from './predict-command.js';
import { registerDeploy } from './deploy-command.js';
import { registerExperiment } from './experiment-command.js';

/** Exit code for bugs: an error no command expected. */
const EXIT_INTERNAL = 70;

/**
 * The CLI's one error boundary: expected errors print one line and exit with their code;
 * anything else prints the stack and versions, since it is a bug to report.
 */
export async function main(argv: readonly string[]): Promise<number> {
  endQuietlyOnClosedStdout();
  const program = new Command('batchserve')
    .description('Pack, serve and benchmark ONNX models with dynamic batching')
    .version(BATCHSERVE_VERSION)
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(`batchserve: ${text.replace(/^error: /, '')}`) })
    .showSuggestionAfterError();
  registerModelArchive(program);
  registerServe(program);
  registerBench(program);
  registerTraffic(program);
  registerCanary(program);
  registerPredict(program);
  registerDeploy(program);
  registerExperiment(program);
  program
    .command('doctor')
    .description('report what this machine can run: versions, execution providers (each tried), GPUs, Vulkan')
    .option('--json', 'print one JSON document for scripts', false)
    .action(async (options: { json: boolean }) => {
      const { runDoctor } = await import('./doctor.js');
      await runDoctor(options);
    });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    // A long-running command (serve) sets its own exit code when it stops.
    return Number(process.exitCode ?? 0);
  } catch (error) {
    return exitCodeFor(error);
  }
}

/**
 * `batchserve … | head` closes stdout before the output ends: a normal end for a command
 * line, not a crash. Other write errors still surface.
 */
function endQuietlyOnClosedStdout(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(0);
  });
}

function exitCodeFor(error: unknown): number {
  if (error instanceof CommanderError) {
    // Help and version are "errors" to commander only because exitOverride is on.
    return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.exitCode === 0
      ? 0
      : 2;
  }
  if (error instanceof BatchserveError) {
    process.stderr.write(`batchserve: ${error.message} [${error.code}]\n`);
    return error.exitCode;
  }
  process.stderr.write(
    `batchserve: internal error — please report it with this output\n` +
      `batchserve ${BATCHSERVE_VERSION}, node ${process.version}, ${process.platform}-${process.arch}\n` +
      `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  return EXIT_INTERNAL;
}
