import { Option, type Command } from 'commander';
import type { BenchCommandOptions } from './bench.js';
import { commaList } from './options.js';
import { withTlsClient } from './tls-options.js';

/** Flags only: the bench's modules load when the command runs. */
export function registerBench(program: Command): void {
  const bench = program
    .command('bench')
    .description(
      'drive a server across batch sizes × delays × load levels; fit T(B) = c + m·B and report the 1 + c/m ceiling',
    )
    .argument('[archive]', 'a .mar to serve and sweep (bench starts and stops serve itself)')
    .option(
      '--url <url>',
      'a running server instead of an archive: its inference API, http://… or grpc://host:port (https://, grpcs:// with TLS)',
    )
    .option('--model <name>', 'the model to drive on --url')
    .option('--management-url <url>', "the --url server's management API, needed to sweep it")
    .option('--token <token>', 'management bearer token (default: $BATCHSERVE_TOKEN, else the key file)')
    .option(
      '--token-file <path>',
      'file holding the management token (default: the one serve writes, $BATCHSERVE_KEY_FILE or ./batchserve.key)',
    )
    .option(
      '--in-process',
      'also measure T(B) straight on the session (archive only): the limit the server is judged against',
      false,
    )
    .option('--concurrency <levels>', 'closed loop: requests in flight, e.g. 1,4,16', commaList)
    .option('--rate <levels>', 'open loop: requests per second, e.g. 200,400', commaList)
    .addOption(new Option('--arrival <kind>', 'open-loop arrivals').choices(['poisson', 'constant']).default('poisson'))
    .option('--batch-sizes <sizes>', 'max_batch_size values to sweep, e.g. 1,4,16', commaList)
    .option(
      '--delays <delays>',
      'max_queue_delay values to sweep, e.g. 0,1ms,5ms; auto is adaptive batching: 0,2ms,auto',
      commaList,
    )
    .option('--instances <counts>', 'instance counts to sweep, e.g. 1,2', commaList)
    .addOption(
      new Option(
        '--protocol <protocol>',
        'how requests are sent (default: v2-binary, or grpc with a grpc:// --url); http-json POSTs --input as it is to --url, any server',
      ).choices(['v2-binary', 'v2-json', 'torchserve', 'grpc', 'grpc-stream', 'http-json']),
    )
    .option('--client-batch <rows>', 'rows per request (http-json: rows the --input body carries, for items/s)', '1')
    .option('--input <file>', 'send this file (JSON body, or raw bytes such as an image) instead of random tensors')
    .option(
      '--input-pool <n>',
      'send n distinct inputs in rotation (n seeds of random tensors, or n variants of --input), so a response cache shows its hit ratio',
      '1',
    )
    .option('--content-type <type>', 'http-json: the --input body’s content type (default application/json)')
    .option('--duration <duration>', 'longest measurement per load level', '10s')
    .option('--requests <count>', 'stop a load level after this many measured requests')
    .option('--window <duration>', 'measurement window', '1s')
    .option('--warmup <duration>', 'load before measuring, excluded from results', '1s')
    .option(
      '--stability <pct>',
      'the last 3 windows must agree within this on throughput, p99 and completions a second',
      '10%',
    )
    .option('--workers <count>', 'client worker threads', '1')
    .option('--slo-p99 <duration>', 'recommend the fastest configuration whose p99 meets this')
    .option(
      '--plan',
      'capacity plan: search each configuration for the highest open-loop rate it sustains within --slo-p99, then size replicas for --target-rate',
      false,
    )
    .option('--target-rate <rate>', 'with --plan: requests per second to serve in all')
    .option('--json <file>', 'write every figure as JSON (schema in docs/bench.md)')
    .option('--csv <file>', 'write one CSV row per point')
    .option('--md <file>', 'write a Markdown report')
    .option('--html <file>', 'write a self-contained HTML report with charts')
    .option('--fail-on <rules>', "exit 1 when a rule holds, e.g. 'p99>50ms,throughput<1000'")
    .option('--baseline <file>', 'an earlier --json report to compare with')
    .option('--max-regression <pct>', 'allowed throughput or p99 regression against --baseline', '10%')
    .option('--pin', 'pin the server to CPU 0 and the client to the others (taskset)', false)
    .option('--device <device>', 'device for the served archive and --in-process')
    .addOption(
      new Option(
        '--openai <api>',
        "drive a running server's OpenAI route at --url (concurrency levels only): tokens/s, time to first token, inter-token latency",
      ).choices(['completions', 'chat', 'embeddings']),
    )
    .option(
      '--max-tokens <n|a-b>',
      "--openai: each request's max_tokens, or a range it is drawn from (e.g. 8-256)",
      '64',
    )
    .addOption(
      new Option('--token-distribution <kind>', '--openai: how max_tokens is drawn from its range')
        .choices(['uniform', 'log-uniform'])
        .default('uniform'),
    )
    .option('--prompt <text>', '--openai: the prompt (embeddings: the input)', 'Once upon a time')
    .option(
      '--system-prompt <text>',
      "--openai: a prefix every request shares (chat: the system message), with a user turn each request's own: what prefix caching saves",
    )
    .option(
      '--response-format <json_object|file.json>',
      '--openai: every answer bound to JSON (json_object) or to the JSON schema in a file: what constrained decoding costs',
    );
  withTlsClient(bench).action(async (archive: string | undefined, options: BenchCommandOptions) => {
    const { runBench } = await import('./bench.js');
    await runBench(archive, options);
  });
}
