import type { Command } from 'commander';
import { commaList, withManagementTarget } from './options.js';
import type { TrafficCommandOptions } from './traffic.js';

/** Flags only: `batchserve traffic show|set|clear MODEL`, a client of the management API. */
export function registerTraffic(program: Command): void {
  const traffic = program
    .command('traffic')
    .description('show or set how requests naming no version spread over versions: A/B split, sticky key, shadow');
  const run =
    (action: 'show' | 'set' | 'clear') =>
    async (model: string, options: TrafficCommandOptions): Promise<void> => {
      const { runTraffic } = await import('./traffic.js');
      await runTraffic(action, model, options);
    };
  withManagementTarget(
    traffic
      .command('show')
      .description('the default version, the split in force, the shadow')
      .argument('<model>', 'the model name'),
  ).action(run('show'));
  withManagementTarget(
    traffic
      .command('set')
      .description("replace the model's traffic policy with the one these flags describe")
      .argument('<model>', 'the model name')
      .option('--split <version=weight...>', 'weights per version, e.g. 1=90,2=10', commaList)
      .option('--sticky-key <where>', 'header:NAME or query:NAME: one user always meets one version')
      .option('--shadow <version>', 'mirror every request to this version and compare its answers')
      .option('--shadow-tolerance <relative>', 'how far numbers may differ and still agree'),
  ).action(run('set'));
  withManagementTarget(
    traffic
      .command('clear')
      .description('drop the split and shadow: the default version takes everything')
      .argument('<model>', 'the model name'),
  ).action(run('clear'));
}
