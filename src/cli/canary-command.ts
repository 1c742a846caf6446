import type { Command } from 'commander';
import type { CanaryCommandOptions } from './canary.js';
import { withManagementTarget } from './options.js';

/** Flags only: `batchserve canary start|status|rollback|promote MODEL`, a client of the management API. */
export function registerCanary(program: Command): void {
  const canary = program
    .command('canary')
    .description('move a model to a new version step by step, inside guardrails on errors, p99, agreement and quality');
  const run =
    (action: 'start' | 'status' | 'rollback' | 'promote') =>
    async (model: string, options: CanaryCommandOptions): Promise<void> => {
      const { runCanary } = await import('./canary.js');
      await runCanary(action, model, options);
    };
  withManagementTarget(
    canary
      .command('start')
      .description(
        "start a canary: the candidate gets each step's share of traffic while it stays inside the guardrails",
      )
      .argument('<model>', 'the model name')
      .requiredOption('--version <version>', 'the candidate version (loaded already)')
      .option('--steps <percents>', 'traffic share per step, rising to 100', '5,20,50,100')
      .option('--interval <duration>', 'how long each step runs before it is judged', '60s')
      .option('--max-error-rate <rate>', "the candidate's largest share of 5xx answers, e.g. 0.1%", '1%')
      .option('--max-p99 <duration>', "the candidate's largest p99 latency, e.g. 200ms")
      .option('--min-requests <count>', 'requests the candidate must answer in a step before it may advance', '10')
      .option(
        '--min-agreement <rate>',
        "mirror the stable version's requests to the candidate and roll back when fewer answers agree, e.g. 98%",
      )
      .option(
        '--agreement-tolerance <number>',
        "how close numbers must be to agree (default: the model's shadow_tolerance, else 1e-5)",
      )
      .option(
        '--max-quality-drop <amount>',
        "roll back when the candidate's accuracy (or mean reward) from feedback falls more than this below the stable's, e.g. 0.02 or 2%",
      ),
  ).action(run('start'));
  const followUps = {
    status: 'the step, live error rate and p99 per version, and the history',
    rollback: 'send 100 % of traffic back to the stable version now',
    promote: 'end the canary early: the candidate becomes the default',
  } as const;
  for (const [action, description] of Object.entries(followUps) as [keyof typeof followUps, string][]) {
    withManagementTarget(canary.command(action).description(description).argument('<model>', 'the model name')).action(
      run(action),
    );
  }
}
