#!/usr/bin/env -S node --initial-old-space-size=64
// The server's V8 flag (src/core/serving-node-flags.ts) on Node's command line, the only place
// it acts: `batchserve serve` is then one process. env -S splits the line: GNU coreutils ≥ 8.30,
// macOS and FreeBSD have it, and npm's Windows shims read it; BusyBox's env (Alpine) has not.
import { main } from '../dist/src/cli/main.js';

process.exitCode = await main(process.argv.slice(2));
