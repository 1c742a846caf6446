import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// One bash per page, fed the page's commands one at a time as a reader pastes them, in a
// fresh folder that holds what a clone has after `npm ci`. Background jobs (a `serve … &`)
// live on from block to block, so the page's blocks share its server.

export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * The ports the docs write: serve's defaults (8080-8082, gRPC 8001), Triton's (8000, 8002),
 * which the Triton pages pass with --port, and OTLP/HTTP's 4318 (a stand-in collector's). Each run puts free ones in their place, so that two
 * pages run at once never meet on a port, nor on one another program holds.
 */
export const PAGE_PORTS = [8080, 8081, 8082, 8001, 8000, 8002, 4318] as const;
/** A page's port → this run's. */
export type PortMap = ReadonlyMap<number, number>;
const PAGE_PORT =
  /(\blocalhost:|\b127\.0\.0\.1:|\b0\.0\.0\.0:|--(?:[a-z]+-)?port[= ])(8080|8081|8082|8001|8000|8002|4318)\b/g;

export interface Ran {
  /** Exit status, as `$?` after the command. */
  readonly status: number;
  /** stdout and stderr together, as a terminal shows them. */
  readonly output: () => Promise<string>;
  /** `$!`: the last background job's pid. */
  readonly lastJob: number;
}

const SENTINEL = '__docs_test__';

export class PageShell {
  readonly #bash: ChildProcess;
  readonly #outputs: string;
  readonly #root: string;
  readonly cwd: string;
  readonly ports: PortMap;
  #stdout = '';
  #count = 0;
  #waiting: ((line: string) => void) | undefined;
  #ended: string | undefined;

  private constructor(root: string, ports: PortMap) {
    this.#root = root;
    this.cwd = join(root, 'clone');
    this.#outputs = join(root, 'outputs');
    this.ports = ports;
    this.#bash = spawn('bash', ['--noprofile', '--norc'], {
      cwd: this.cwd,
      env: shellEnv(join(root, 'bin'), ports),
      stdio: ['pipe', 'pipe', 'inherit'],
      // Its own process group, so that whatever the page started can be stopped with it.
      detached: true,
    });
    this.#bash.stdout?.on('data', (chunk: Buffer) => {
      this.#stdout += chunk.toString();
      const end = this.#stdout.lastIndexOf('\n');
      if (end === -1) return;
      const lines = this.#stdout.slice(0, end).split('\n');
      this.#stdout = this.#stdout.slice(end + 1);
      for (const line of lines) if (line.startsWith(SENTINEL)) this.#waiting?.(line);
    });
    this.#bash.once('exit', (code, signal) => {
      this.#ended = `the shell exited (${signal ?? code})`;
      this.#waiting?.('');
    });
  }

  /** A folder like a clone after `npm ci`, `batchserve` on PATH as `npm link` puts it, and a shell in it. */
  static async open(): Promise<PageShell> {
    const root = await mkdtemp(join(tmpdir(), 'batchserve-docs-'));
    await Promise.all(['clone', 'bin', 'outputs'].map((name) => mkdir(join(root, name))));
    await Promise.all(cloneEntries().map((name) => symlink(join(REPO, name), join(root, 'clone', name))));
    await symlink(join(REPO, 'bin', 'batchserve.js'), join(root, 'bin', 'batchserve'));
    await symlink(join(REPO, 'bin', 'model-archive.js'), join(root, 'bin', 'model-archive'));
    return new PageShell(root, await freePorts());
  }

  /** The page's text with its ports (after a host or a --…port flag) replaced by this run's. */
  toRun(text: string): string {
    return text.replace(PAGE_PORT, (_, before: string, port: string) => `${before}${this.ports.get(Number(port))}`);
  }

  /** Output as the page would show it: this run's ports back to the page's. */
  asShown(output: string): string {
    let shown = output;
    for (const [page, run] of this.ports) shown = shown.replace(new RegExp(`:${run}\\b`, 'g'), `:${page}`);
    return shown;
  }

  /** Runs `text` in the page's shell (stdin /dev/null) and resolves when it returns, or rejects after `timeoutMs`. */
  run(text: string, timeoutMs: number): Promise<Ran> {
    if (this.#ended) return Promise.reject(new Error(this.#ended));
    const index = (this.#count += 1);
    const file = join(this.#outputs, String(index));
    const script = `{ ${text}\n} </dev/null >${quote(file)} 2>&1\nprintf '\\n${SENTINEL} %s %s %s\\n' ${index} $? "\${!:-0}"\n`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting = undefined;
        // The shell is stuck behind it: the page's later commands could not run.
        this.#ended = `the shell was stopped: a command ran past ${timeoutMs / 1000} s`;
        this.#killGroup('SIGKILL');
        reject(new Error(`still running after ${timeoutMs / 1000} s: ${text}`));
      }, timeoutMs);
      this.#waiting = (line) => {
        const [, ran, status, job] = line.split(' ');
        if (line !== '' && Number(ran) !== index) return;
        clearTimeout(timer);
        this.#waiting = undefined;
        if (line === '') {
          reject(new Error(this.#ended));
          return;
        }
        resolve({ status: Number(status), lastJob: Number(job), output: () => readFile(file, 'utf8') });
      };
      this.#bash.stdin?.write(script);
    });
  }

  /** Stops the page's jobs (SIGTERM: servers drain), then anything left in its process group, and removes the folder. */
  async close(): Promise<void> {
    const exited = new Promise<void>((done) => {
      if (this.#ended) done();
      else this.#bash.once('exit', () => done());
    });
    if (!this.#ended) this.#bash.stdin?.end('kill $(jobs -p) 2>/dev/null; wait; exit 0\n');
    const late = setTimeout(() => this.#killGroup('SIGKILL'), 40_000);
    await exited;
    clearTimeout(late);
    this.#killGroup('SIGKILL');
    await rm(this.#root, { recursive: true, force: true, maxRetries: 5 });
  }

  #killGroup(signal: NodeJS.Signals): void {
    try {
      if (this.#bash.pid !== undefined) process.kill(-this.#bash.pid, signal);
    } catch {
      // The group is gone already.
    }
  }
}

/**
 * The top-level names a fresh clone has: git's tracked files, node_modules, and the dist that
 * `npm ci` builds. Not what else lies in this checkout (a README tour's model-store/, run here
 * by hand, would be written through the link).
 */
function cloneEntries(): string[] {
  const listed = spawnSync('git', ['ls-files', '-z'], {
    cwd: REPO,
    encoding: 'utf8',
  });
  if (listed.status !== 0) throw new Error(`git ls-files: ${listed.stderr}`);
  const names = new Set(
    listed.stdout
      .split('\0')
      .filter(Boolean)
      .map((path) => path.split('/')[0] as string),
  );
  return [...names.add('node_modules').add('dist')];
}

/** The environment a reader's shell would have, with serve's and the management commands' ports moved to free ones. */
function shellEnv(bin: string, ports: PortMap): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !key.startsWith('BATCHSERVE_') && !['NODE_TEST_CONTEXT', 'BASH_ENV', 'ENV', 'CDPATH'].includes(key),
    ),
  );
  return {
    ...env,
    PATH: `${bin}:${process.env.PATH ?? ''}`,
    BATCHSERVE_PORT: String(ports.get(8080)),
    BATCHSERVE_MANAGEMENT_PORT: String(ports.get(8081)),
    BATCHSERVE_METRICS_PORT: String(ports.get(8082)),
    BATCHSERVE_GRPC_PORT: String(ports.get(8001)),
    BATCHSERVE_MANAGEMENT_URL: `http://127.0.0.1:${ports.get(8081)}`,
  };
}

async function freePorts(): Promise<PortMap> {
  const servers = await Promise.all(
    PAGE_PORTS.map(
      () =>
        new Promise<ReturnType<typeof createServer>>((ready) => {
          const server = createServer();
          server.listen(0, '127.0.0.1', () => ready(server));
        }),
    ),
  );
  const ports = new Map(PAGE_PORTS.map((page, i) => [page, (servers[i]?.address() as { port: number }).port]));
  await Promise.all(servers.map((server) => new Promise((done) => server.close(done))));
  return ports;
}

function quote(path: string): string {
  return `'${path.replaceAll("'", "'\\''")}'`;
}
