import type { Command } from 'commander';
import { commaList } from './options.js';
import type { ServeCommandOptions } from './serve.js';

/** Flags only: the server's modules load when the command runs. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve model archives with dynamic batching (KServe v2, TorchServe routes, management, metrics)')
    .option(
      '--models <name=path.mar...>',
      'models to load (comma-separated or repeated); "all" loads the model store',
      commaList,
    )
    .option('--model-store <dir>', 'folder of archives for --models all and register-by-name')
    .option('--config <server.yaml>', 'server config file; flags override it')
    .option('--host <address>', 'address every API binds to (default 127.0.0.1)')
    .option('--port <port>', 'inference port (default 8080; 0 picks a free one)')
    .option('--management-port <port>', 'management port (default 8081)')
    .option('--metrics-port <port>', 'metrics port (default 8082)')
    .option('--device <device>', "override every model's device: cpu, auto, webgpu, cuda[:N], tensorrt[:N]")
    .option('--max-request-size <bytes>', 'largest request body (default 64 MiB)')
    .option('--headers-timeout <duration>', "how long a client may take to send a request's headers (default 10s)")
    .option(
      '--request-timeout <duration>',
      'how long a client may take to send a whole request; 0 is none (default 300s)',
    )
    .option('--keep-alive-timeout <duration>', 'how long an idle keep-alive connection stays open (default 5s)')
    .option('--max-connections <count>', 'open connections each port accepts at once (default 1024)')
    .option('--max-header-size <bytes>', 'largest request header section; larger get 431 (default 16 KiB)')
    .option('--drain-timeout <duration>', 'how long SIGTERM waits for admitted requests (default 30s)')
    .option('--log-level <level>', 'debug, info, warn, error or silent (default info)')
    .option('--key-file <path>', 'where the generated management token is written (default ./batchserve.key)')
    .option('--no-auth', 'disable the management API token (a warning is logged)')
    .option(
      '--model-control <mode>',
      'v2 repository load/unload on the inference port: explicit (with the management token) or none (default explicit)',
    )
    .action(async (options: ServeCommandOptions) => {
      const { runServe } = await import('./serve.js');
      process.exitCode = await runServe(options);
    });
}
