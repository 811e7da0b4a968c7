// Start-up: how long `agentvm` takes to answer, as a person types it, next to `node -e 0` measured in the
// same run (the least any Node program takes here); how soon a server killed with -9 listens again; and
// what an idle server holds resident. The command runs as installed: the bundle `npm ci` builds (made
// here first when it is missing or older than the sources).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pct, report, row } from './report.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BIN = path.join(root, 'bin/agentvm.js');
const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 15);
const RESTARTS = Number(process.env.BENCH_STARTUP_RESTARTS ?? 5);
const IDLE_MS = 15_000;
const imageDir = process.env.AGENTVM_IMAGE_DIR ?? '/var/cache/agentvm/images';

/** The same test bin/agentvm.js makes: the bundle is current when no source it was made from is newer. */
function bundleIsCurrent(): boolean {
  try {
    const { built_at: builtAt, inputs } = JSON.parse(readFileSync(path.join(root, 'dist/build.json'), 'utf8')) as { built_at: number; inputs: string[] };
    return inputs.every((f) => statSync(path.join(root, f)).mtimeMs <= builtAt);
  } catch {
    return false;
  }
}

/** Wall time of one process from spawn to exit, in ms; it must exit 0. */
function timed(args: string[], env: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${args.join(' ')} exited ${code}: ${err}`))));
  });
}

/** p50 of each command's runs, the commands taken in turns so that the machine's moods fall on all alike. */
async function inTurns(commands: Record<string, { args: string[]; env?: Record<string, string> }>): Promise<Record<string, number>> {
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(commands).map((k) => [k, []]));
  for (const c of Object.values(commands)) await timed(c.args, c.env); // warm the page cache
  for (let i = 0; i < RUNS; i++) for (const [k, c] of Object.entries(commands)) times[k].push(await timed(c.args, c.env));
  return Object.fromEntries(Object.entries(times).map(([k, t]) => [k, pct(t, 50)]));
}

interface Server {
  proc: ChildProcess;
  url: string;
  out: () => string;
}

/** `agentvm serve` on a free port; answers once it logs that it listens. */
function serve(dataDir: string): Promise<Server> {
  const proc = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    cwd: root,
    env: {
      ...process.env,
      AGENTVM_IMAGE_DIR: imageDir,
      AGENTVM_IMAGE_BUILD: 'off',
      // No VM at all: no golden VM booting for a snapshot, no standbys.
      AGENTVM_SNAPSHOTS: 'off',
      AGENTVM_STANDBY_VMS: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in 60 s:\n${out.slice(-2000)}`)), 60_000);
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /"url":"(http[^"]+)".*"agentvm is listening"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], out: () => out });
      }
    });
    proc.once('exit', (code) => reject(new Error(`serve exited ${code}:\n${out.slice(-2000)}`)));
  });
}

async function until(what: string, ok: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function killed(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  const gone = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGKILL');
  return gone;
}

const rssMib = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

if (!bundleIsCurrent()) {
  process.stderr.write('startup: the bundle is missing or older than the sources; building it (npm ci does)\n');
  const built = spawnSync(process.execPath, [path.join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('the build failed');
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-bench-startup-'));
let server: Server | undefined;
try {
  server = await serve(dataDir);
  const adminToken = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  const tenant = (await (
    await fetch(`${server.url}/v1/admin/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'startup-bench@example.com' }),
    })
  ).json()) as { api_key: string };
  const client = { AGENTVM_BASE_URL: server.url, AGENTVM_API_KEY: tenant.api_key, XDG_CONFIG_HOME: dataDir };

  // Idle: the server's start done (VMs re-adopted, the image looked at), then left alone.
  await until('the image looked at', async () => /guest image ready|no guest image|VM driver not usable/.test(server!.out()));
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const idleRss = rssMib(server.proc.pid!);
  const nodeRss = await new Promise<number>((resolve) => {
    const idle = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 2000)']);
    setTimeout(() => {
      resolve(rssMib(idle.pid!));
      idle.kill();
    }, 1000);
  });

  const p50 = await inTurns({
    node: { args: ['-e', '0'] },
    version: { args: [BIN, '--version'] },
    whoami: { args: [BIN, 'whoami'], env: client },
    list: { args: [BIN, 'vms', 'list'], env: client },
  });

  // kill -9, then the same command again on the same data dir: until /healthz answers, then until an API call does.
  const listen: number[] = [];
  const answer: number[] = [];
  const logged: number[] = [];
  for (let i = 0; i < RESTARTS; i++) {
    const killedAt = performance.now();
    await killed(server.proc);
    server = await serve(dataDir);
    await until('listening', async () => (await fetch(`${server!.url}/healthz`)).ok);
    listen.push(performance.now() - killedAt);
    await until('answering', async () => (await fetch(`${server!.url}/v1/api/whoami`, { headers: { authorization: `Bearer ${tenant.api_key}` } })).ok);
    answer.push(performance.now() - killedAt);
    logged.push(Number(/"listen_ms":(\d+)/.exec(server.out())![1]));
  }

  const n = p50.node;
  const base = `${n.toFixed(0)} ms \`node -e 0\``;
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  await report(`Start-up: p50 of ${RUNS} runs each, in turns; ${RESTARTS} restarts after kill -9; the command as \`npm ci\` builds it`, [
    row('startup', '`agentvm --version`', ms(p50.version), base, p50.version / n, '≤ 4×', p50.version <= 4 * n),
    row('startup', '`agentvm whoami` against a running server', ms(p50.whoami), base, p50.whoami / n, '≤ 5×', p50.whoami <= 5 * n),
    row('startup', '`agentvm vms list` against a running server', ms(p50.list), base, p50.list / n, '≤ 5×', p50.list <= 5 * n),
    row('startup', 'kill -9 of `serve` → listening (/healthz answers), p50', ms(pct(listen, 50)), base, pct(listen, 50) / n, '≤ 15×', pct(listen, 50) <= 15 * n),
    row('startup', 'kill -9 of `serve` → first API answer (whoami), p50', ms(pct(answer, 50)), base, pct(answer, 50) / n),
    row('startup', "`serve`'s own listen_ms (process start → listening), p50", ms(pct(logged, 50)), base, pct(logged, 50) / n),
    row('startup', 'idle `serve` resident memory, no VM', `${idleRss.toFixed(0)} MiB`, `${nodeRss.toFixed(0)} MiB idle \`node\``, null, '≤ 150 MiB', idleRss <= 150),
  ]);
} finally {
  if (server) await killed(server.proc);
  await rm(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}
