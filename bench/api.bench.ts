// API throughput: whoami and listHarnesses on the embedded database next to a bare hello route
// of the same framework, measured in one run at 50 connections. Prints the figures and the ratios.
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { report, row } from './report.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = 50;

/** Starts a server whose output goes to a file, as a service manager would send it: a pipe this busy process drains slowly would throttle it. */
async function start(args: string[], logFile: string, env: Record<string, string> = {}): Promise<{ proc: ChildProcess; url: string }> {
  const out = await open(logFile, 'w');
  const proc = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', out.fd, 'inherit'] });
  await out.close();
  for (let i = 0; i < 600; i++) {
    if (proc.exitCode !== null) throw new Error(`exited ${proc.exitCode}: ${await readFile(logFile, 'utf8')}`);
    const m = /"url":"(http:\/\/[^"]+)"/.exec(await readFile(logFile, 'utf8'));
    if (m) return { proc, url: m[1] };
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGTERM');
  throw new Error(`no URL in ${logFile}`);
}

async function load(url: string, headers: Record<string, string> = {}) {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  if (result.non2xx || result.errors) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p99: result.latency.p99, p50: result.latency.p50 };
}

const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-bench-'));
const procs: ChildProcess[] = [];
try {
  const hello = await start(['--import', 'tsx', 'bench/hello-server.ts'], path.join(dataDir, 'hello.log'));
  procs.push(hello.proc);
  const api = await start(['bin/agentvm.js', 'serve', '--port', '0', '--data-dir', dataDir], path.join(dataDir, 'server.log'), {
    AGENTVM_RATE_LIMIT: '1000000',
    AGENTVM_RATE_BURST: '1000000',
    AGENTVM_IMAGE_BUILD: 'off',
    // No golden VM booting and no standbys being made on these 2 cores while the load runs: the
    // figure is the API's, beside a bare route measured at another moment.
    AGENTVM_SNAPSHOTS: 'off',
    AGENTVM_STANDBY_VMS: '0',
  });
  procs.push(api.proc);
  // The server logs every request at info, as it does in production: that cost is part of the figure.
  const adminToken = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  const tenant = await (
    await fetch(`${api.url}/v1/admin/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bench@example.com' }),
    })
  ).json();
  const auth = { authorization: `Bearer ${tenant.api_key}` };

  await load(`${hello.url}/hello`); // warm-up of the client and both servers
  await load(`${api.url}/v1/api/whoami`, auth);
  const bare = await load(`${hello.url}/hello`);
  const whoami = await load(`${api.url}/v1/api/whoami`, auth);
  const harnesses = await load(`${api.url}/v1/api/harnesses`, auth);

  const ratio = whoami.rps / bare.rps;
  await report(`API throughput, ${CONNECTIONS} connections, ${DURATION} s each, embedded database`, [
    row('api', 'whoami req/s (p99 ms)', `${Math.round(whoami.rps)} (${whoami.p99})`, `${Math.round(bare.rps)} (${bare.p99}) bare hello route`, ratio, '≥ 50%', ratio >= 0.5),
    row('api', 'listHarnesses req/s (p99 ms)', `${Math.round(harnesses.rps)} (${harnesses.p99})`, `${Math.round(bare.rps)} bare hello route`, harnesses.rps / bare.rps),
  ]);
} finally {
  // Each server ends on its own (SIGTERM) before its files are removed.
  await Promise.all(
    procs.map((p) =>
      p.exitCode !== null || p.signalCode !== null
        ? undefined
        : new Promise<void>((resolve) => {
            const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
            p.once('exit', () => (clearTimeout(timer), resolve()));
            p.kill('SIGTERM');
          }),
    ),
  );
  await rm(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}
