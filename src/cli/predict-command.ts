import { Option, type Command } from 'commander';
import type { MergeCommandOptions, PredictCommandOptions } from './predict.js';
import { commaList } from './options.js';

const EXIT_CODES = `
Exit codes:
  0  every row scored
  1  the job finished but some rows failed (listed in <output>.errors.jsonl:
     row, id, reason, code), or it could not run (a missing file, an existing output,
     a model that does not load: the error's code says which)
  2  usage: a flag, a dataset the model cannot take, a checkpoint of another job

Input (--input-format, default from the path):
  jsonl   one request a line: a KServe v2 body ({"inputs": [...]}) or {"name": nested arrays}
  images  a folder, walked recursively in sorted order; each file's bytes go to the handler
          as POST /predictions sends them (--glob, default *.png/*.jpg/*.jpeg at any depth)
  npy     a .npy array whose first dimension is the row (v1/v2 header, C order,
          <f4 <f8 <i4 <i8 |u1 |b1)
  csv     a header row, then one row per record (--csv-columns, --id-column)

Resuming: <output>.checkpoint.json is rewritten every --checkpoint-interval. After a crash or
kill, run the same command with --resume: it continues after the last checkpoint and the
output is the same as an uninterrupted run's. The output appears (renamed into place) only
when complete.

Sharding: --shard I/N scores only the I-th (0-based) of N contiguous slices of the input's
rows into out.shard-I-of-N.jsonl; "predict merge --output out.jsonl out.shard-*.jsonl" joins
them after checking that every shard is finished and none is missing or repeated.
`;

/** Flags only: `batchserve predict ARCHIVE --input … --output …` and `predict merge`. */
export function registerPredict(program: Command): void {
  const predict = program
    .command('predict')
    .description(
      "score a whole dataset offline with the archive's own handler (what serve runs), resumably, into JSON Lines, CSV or Parquet",
    )
    .argument('<archive>', 'the model archive (.mar file or archive folder)')
    // Checked when the command runs: commander would demand them of `predict merge` too.
    .option('--input <path>', 'the dataset (required): a .jsonl, .npy or .csv file, or a folder of images')
    .option('--output <path>', 'the output file (required); its extension picks the format unless --format says')
    .addOption(new Option('--input-format <kind>', 'how to read --input').choices(['jsonl', 'images', 'npy', 'csv']))
    .addOption(
      new Option('--format <format>', 'output format (default: from the extension, else jsonl)').choices([
        'jsonl',
        'csv',
        'parquet',
      ]),
    )
    .option('--glob <pattern>', 'image folders: the files to score, by relative path (e.g. "**/*.png")')
    .option('--csv-columns <names>', "CSV: the columns that make the model's one input, in order", commaList)
    .option('--id-column <name>', "CSV: the column holding each row's id (default: its line number)")
    .option('--batch-size <rows>', "rows per forward pass (default: the archive's max_batch_size)")
    .option('--instances <count>', "model instances (default: the archive's)")
    .option('--device <device>', 'run every instance on this device: cpu, auto, webgpu, cuda[:N], tensorrt[:N], sim')
    .option(
      '--shard <I/N>',
      'score only slice I of N contiguous slices of the rows (I from 0 to N-1); writes <output stem>.shard-I-of-N<ext>',
    )
    .option('--resume', 'continue the partial run of this output, if there is one', false)
    .option('--force', 'replace an existing output, checkpoint or partial run', false)
    .option('--quiet', 'print nothing but errors', false)
    .option(
      '--progress-interval <duration>',
      'how often a progress line is printed when stderr is not a terminal',
      '10s',
    )
    .option('--checkpoint-interval <duration>', 'how often written rows are committed to the checkpoint', '2s')
    .addHelpText('after', EXIT_CODES)
    .action(async (archive: string, options: PredictCommandOptions) => {
      const { runPredict } = await import('./predict.js');
      await runPredict(archive, options);
    });
  predict
    .command('merge')
    .description(
      'join the outputs of predict --shard I/N in order, checking every shard is finished, none missing or repeated',
    )
    .argument('<shards...>', 'the shard outputs (out.shard-0-of-4.jsonl …), in any order')
    .requiredOption('--output <path>', 'the merged output')
    .option('--force', 'replace an existing output', false)
    .option('--quiet', 'print nothing but errors', false)
    .action(async (shards: string[], options: MergeCommandOptions) => {
      const { runMerge } = await import('./predict.js');
      await runMerge(shards, options);
    });
}
