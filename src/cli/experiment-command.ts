import type { Command } from 'commander';
import type { ExperimentPlanOptions } from './experiment.js';
import type { ExperimentReportOptions } from './experiment-report.js';

/**
 * Flags only: `batchserve experiment plan`, the sample size an A/B experiment needs, and
 * `batchserve experiment report`, what a prediction log says about the variants it served.
 */
export function registerExperiment(program: Command): void {
  const experiment = program.command('experiment').description('plan and read A/B experiments between model versions');
  experiment
    .command('plan')
    .description('the sample size per variant to detect an effect on a rate (or, with --sd, a mean) metric')
    .requiredOption('--baseline <value>', "the control's rate, e.g. 0.10 (with --sd: its mean)")
    .requiredOption('--mde <value>', 'the minimum detectable effect: an absolute difference, e.g. 0.02')
    .option('--relative', '--mde is a fraction of the baseline (0.2 = a 20 % lift)', false)
    .option('--alpha <value>', 'two-sided significance level of the whole experiment', '0.05')
    .option('--power <value>', 'chance of detecting the effect when it is there', '0.8')
    .option('--variants <count>', 'arms, control included; above 2 alpha is split among the comparisons', '2')
    .option('--sd <value>', "a mean metric's standard deviation (then --baseline is the mean)")
    .option('--json', 'print one JSON document for scripts', false)
    .action(async (options: ExperimentPlanOptions) => {
      const { runExperimentPlan } = await import('./experiment.js');
      runExperimentPlan(options);
    });
  experiment
    .command('report')
    .description('compare the variants in a prediction log: each with the control, guardrails beside, and a verdict')
    .requiredOption('--log <path>', 'a log folder, one .jsonl file, or the folder given to serve --prediction-log')
    .requiredOption('--model <name>', 'the model whose variants to compare')
    .option('--metric <name>', 'reward, accuracy, latency or error-rate', 'reward')
    .option('--control <version>', 'the version the others are compared with (default: the lowest)')
    .option('--alpha <value>', 'two-sided significance level of the whole experiment', '0.05')
    .option('--planned-n <count>', 'observations per variant the experiment was planned for (experiment plan)')
    .option('--test <kind>', 'fixed (decide at the planned n) or sequential (mixture SPRT, valid at any look)', 'fixed')
    .option('--mde <value>', "the minimum detectable effect, absolute: the sequential test's τ")
    .option('--json', 'print one JSON document for scripts', false)
    .action(async (options: ExperimentReportOptions) => {
      const { runExperimentReport } = await import('./experiment-report.js');
      await runExperimentReport(options);
    });
}
