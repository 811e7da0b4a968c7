/**
 * `agentvm`: the commands, each loading its own modules when it runs (a command's start is what
 * people feel: `agentvm --version` loads commander and this file, a customer command adds the client
 * and the commands made from the operations' specs, and only `serve` loads the server).
 */
import { Command, Option } from 'commander';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import path from 'node:path';
import type { loadConfig } from '../config.ts';
import { EXIT } from './exitCodes.ts';
import type { OperationSpec } from './operationSpec.ts';

/** Every customer operation's spec, made ahead by the bundle's build (scripts/build.mjs); undefined in the sources. */
declare const AGENTVM_OPERATION_SPECS: OperationSpec[] | undefined;

/** The specs the customer commands are made from: the bundle's own, else made from the descriptors now. */
export async function operationSpecs(): Promise<OperationSpec[]> {
  if (typeof AGENTVM_OPERATION_SPECS !== 'undefined') return AGENTVM_OPERATION_SPECS;
  const [{ CUSTOMER_OPERATIONS }, { specOf }] = await Promise.all([import('../api/routes.ts'), import('./operationSpec.ts')]);
  return CUSTOMER_OPERATIONS.map(specOf);
}

/** Commands that need neither the customer nor the operator commands made: their parse skips making them. */
const STANDALONE = new Set(['serve', 'host', 'image', 'mcp', 'db-init']);

const version = () => (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * A new embedded database is made by a process of its own (`agentvm db-init`): Postgres's initdb peaks
 * at ~600 MiB and leaves ~60 MiB of freed memory that a process keeps for the rest of its life.
 */
async function makeEmbeddedDb(dir: string): Promise<void> {
  if (existsSync(path.join(dir, 'PG_VERSION'))) return;
  const bin = fileURLToPath(new URL('../../bin/agentvm.js', import.meta.url));
  const child = spawn(process.execPath, [...process.execArgv, bin, 'db-init', dir], { stdio: ['ignore', 'inherit', 'inherit'] });
  const code = await new Promise<number | null>((resolve, reject) => child.once('error', reject).once('exit', resolve));
  if (code !== 0) throw new Error(`making the embedded database in ${dir} failed (exit ${code})`);
}

function collectOnce(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

async function serveUntilSignal(config: ReturnType<typeof loadConfig>): Promise<void> {
  // The server listens before its start is done: a SIGTERM or Ctrl-C that comes meanwhile stops it
  // once started, cleanly (a second Ctrl-C ends it at once).
  let starting: Promise<{ close(): Promise<void>; started: Promise<void> }> | undefined;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      if (!starting) process.exit(0);
      starting.then((server) => server.close()).then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }
  // V8 grows its young generation when most of what it holds survives, as all of a server's modules
  // and parts do while it starts: grown, it stayed resident (~25 MiB) in an idle server. Held at its
  // least through the start, it may grow again under load.
  setFlagsFromString('--semi-space-growth-factor=1');
  const [{ startServer }, { createLogger }] = await Promise.all([import('../server.ts'), import('../log.ts')]);
  starting = startServer(config, createLogger(config.logLevel), { makeDb: makeEmbeddedDb });
  const server = await starting;
  setFlagsFromString('--semi-space-growth-factor=2');
  // What the start left behind (the modules' parse data, the image check's agent bundle, buffers read
  // once) goes in one full collection once the start is done, rather than staying resident until
  // the heap grows enough for V8 to make its first.
  void server.started.then(collectOnce, () => undefined);
}

/** An error nothing awaited: said plainly, and the process ends non-zero rather than running on half-broken. */
function exitOnUnhandled(err: unknown): never {
  process.stderr.write(`agentvm: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}

/**
 * A reader that goes before the output ends (`agentvm vms list | head -1`) ends the command quietly,
 * as SIGPIPE ends a Unix tool (Node ignores the signal, so the write fails with EPIPE instead): exit
 * 141, the status a shell shows for a tool that SIGPIPE ended. What the command asked of the server
 * stands. Not for `serve` and `host`: their stdout is the log, and a server outlives its log reader.
 */
function endOnClosedStdout(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' ? process.exit(EXIT.closedOutput) : exitOnUnhandled(err)));
}

export async function main(argv: string[]): Promise<void> {
  process.on('unhandledRejection', exitOnUnhandled);
  // The WebAssembly a command runs (fetch's HTTP parser; the server's embedded Postgres) by V8's
  // baseline compiler only: optimising it in the background made each command's exit wait ~80 ms.
  setFlagsFromString('--liftoff-only');
  const command = argv.slice(2).find((a) => !a.startsWith('-'));
  if (command !== 'serve' && command !== 'host') endOnClosedStdout();
  const program = new Command('agentvm')
    .description('agentvm: an isolated microVM for every AI coding agent')
    .version(version(), '-V, --version', 'print the version')
    .showHelpAfterError();
  const loadConfig = async (...args: Parameters<typeof import('../config.ts').loadConfig>) => (await import('../config.ts')).loadConfig(...args);

  program
    .command('serve')
    .description('run the platform: API, reconcilers and the local VM driver')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--port <port>', 'port to listen on').env('PORT').default('8080'))
    .addOption(new Option('--data-dir <dir>', 'where the database, images and disks live').env('AGENTVM_DATA_DIR').default('./.agentvm'))
    .addOption(new Option('--role <role>', 'all: API and VMs in one process; api: an API replica (VMs on `agentvm host` machines)').choices(['all', 'api']).env('AGENTVM_ROLE').default('all'))
    .addHelpText('after', '\nExamples:\n  npx agentvm serve --port 8080 --data-dir ./.agentvm\n  DATABASE_URL=postgres://… npx agentvm serve --role api --port 8080')
    .action(async (opts: { host: string; port: string; dataDir: string; role: string }) => serveUntilSignal(await loadConfig(opts)));

  const host = program
    .command('host')
    .description('a VM host for API replicas: runs the VMs placed on this machine (needs DATABASE_URL; AGENTVM_INTERNAL_TLS_* for TLS)')
    .option('--host <host>', 'address of the internal endpoint', '127.0.0.1')
    .addOption(new Option('--port <port>', 'port of the internal endpoint').env('PORT').default('8081'))
    .addOption(new Option('--data-dir <dir>', "where this host's disks, images and snapshots live").env('AGENTVM_DATA_DIR').default('./.agentvm-host'))
    .addHelpText('after', '\nExample:\n  DATABASE_URL=postgres://… AGENTVM_TEMPLATE_DIR=/shared/templates npx agentvm host --port 8081')
    .action(async (opts: { host: string; port: string; dataDir: string }) => serveUntilSignal(await loadConfig({ ...opts, role: 'host' })));
  host
    .command('drain')
    .description("place no new VMs on this host (its VMs keep running; --data-dir names the host); --undo places VMs here again")
    .option('--undo', 'take new VMs again')
    .action(async (opts: { undo?: boolean }) => {
      const { drainHost } = await import('../host/hostRecord.ts');
      const hostId = await drainHost(await loadConfig({ dataDir: host.opts<{ dataDir: string }>().dataDir }), !opts.undo);
      process.stdout.write(`${hostId} ${opts.undo ? 'takes new VMs again' : 'is draining: no new VMs go there'}\n`);
    });

  program
    .command('db-init', { hidden: true })
    .description("make a new embedded database and apply the migrations (what `serve` runs apart on a data dir's first start)")
    .argument('<dir>', 'the database directory (<data-dir>/db)')
    .action(async (dir: string) => {
      const { openDb } = await import('../store/db.ts');
      await (await openDb({ pgliteDir: path.resolve(dir) })).close();
    });

  program
    .command('image')
    .description('the guest image every VM boots')
    .command('build')
    .description('build the guest image (kernel, initramfs, Debian root with Node and the guest agent); needs root')
    .addOption(new Option('--image-dir <dir>', 'where images are kept').env('AGENTVM_IMAGE_DIR'))
    .addOption(new Option('--data-dir <dir>', 'data dir (images go under it unless --image-dir)').env('AGENTVM_DATA_DIR').default('./.agentvm'))
    .option('--json', 'print the image manifest as JSON')
    .action(async (opts: { imageDir?: string; dataDir: string; json?: boolean }) => {
      const imageDir = path.resolve(opts.imageDir ?? path.join(opts.dataDir, 'images'));
      const started = Date.now();
      const { buildImage } = await import('../image/build.ts');
      const image = await buildImage(imageDir, (msg) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${msg}\n`));
      if (opts.json) process.stdout.write(`${JSON.stringify({ ...image.manifest, dir: image.dir }, null, 2)}\n`);
      else process.stdout.write(`guest image ${image.id} at ${image.dir} (kernel ${image.manifest.kernel_release})\n`);
    });

  // `agentvm --version` and the standalone commands go without them.
  const versionOnly = command === undefined && argv.some((a) => a === '-V' || a === '--version');
  if (!versionOnly && !STANDALONE.has(command ?? '')) {
    const [{ customerCommands }, { adminCommands }, specs] = await Promise.all([import('./customer.ts'), import('./admin.ts'), operationSpecs()]);
    customerCommands(program, specs);
    program.addCommand(adminCommands());
  }
  program
    .command('mcp')
    .description('the MCP server on stdio, for agents and desktop clients (uses your login or AGENTVM_API_KEY)')
    .addHelpText('after', '\nExample (a desktop client\'s config):\n  {"command": "npx", "args": ["agentvm", "mcp"], "env": {"AGENTVM_API_KEY": "avm_live_…"}}')
    .action(async () => {
      const [{ createMcpServer }, { apiClient, resolveCredentials }, { StdioServerTransport }] = await Promise.all([
        import('../mcp/server.ts'),
        import('../client/client.ts'),
        import('@modelcontextprotocol/sdk/server/stdio.js'),
      ]);
      const { baseUrl, key } = await resolveCredentials();
      const server = createMcpServer(() => apiClient(baseUrl, key));
      await server.connect(new StdioServerTransport());
    });
  program
    .command('completion')
    .description('print a shell completion script (bash; zsh with bashcompinit)')
    .argument('[shell]', 'bash or zsh', 'bash')
    .addHelpText('after', '\nExample:\n  source <(npx agentvm completion bash)')
    .action(async (shell: string) => {
      const { bashCompletion } = await import('./completion.ts');
      const script = bashCompletion(program);
      process.stdout.write(shell === 'zsh' ? `autoload -U +X bashcompinit && bashcompinit\n${script}` : script);
    });
  try {
    await program.parseAsync(argv);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
