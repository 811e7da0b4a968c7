// Webhooks: how soon after an event its first delivery attempt reaches a receiver (p50 of 50 events,
// target ≤ 1 s), and whoami's p99 with 1,000 events queued to a receiver that never answers (each
// attempt waits out its 10 s timeout) against whoami's p99 with nothing queued, in the same run
// (target: at most 10 % worse). One `agentvm serve` on the embedded database; receivers on loopback.
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pct, report, row } from './report.ts';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);

async function start(dataDir: string): Promise<{ proc: ChildProcess; url: string }> {
  const logFile = path.join(dataDir, 'server.log');
  const out = await open(logFile, 'w');
  const proc = spawn(process.execPath, ['bin/agentvm.js', 'serve', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, AGENTVM_RATE_LIMIT: '1000000', AGENTVM_RATE_BURST: '1000000', AGENTVM_IMAGE_BUILD: 'off', AGENTVM_IMAGE_DIR: path.join(dataDir, 'no-images'), AGENTVM_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' },
    stdio: ['ignore', out.fd, 'inherit'],
  });
  await out.close();
  for (let i = 0; i < 600; i++) {
    const m = /"url":"(http:\/\/[^"]+)"/.exec(await readFile(logFile, 'utf8'));
    if (m) return { proc, url: m[1] };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not start');
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/` };
}

const whoamiP99 = async (url: string, key: string) => {
  const r = await autocannon({ url: `${url}/v1/api/whoami`, connections: 20, duration: DURATION, headers: { authorization: `Bearer ${key}` } });
  if (r.non2xx || r.errors) throw new Error(`whoami: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return r.latency.p99;
};

const dataDir = await mkdtemp(path.join(tmpdir(), 'agentvm-bench-webhooks-'));
let proc: ChildProcess | undefined;
const servers: Server[] = [];
try {
  const server = await start(dataDir);
  proc = server.proc;
  const admin = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
  const post = async (p: string, key: string, body: unknown) =>
    (await fetch(`${server.url}${p}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
  const tenant = await post('/v1/admin/tenants', admin, { email: 'bench-hooks@example.com' });
  const key = tenant.api_key as string;

  // Latency: event written (its created_at) → the first attempt at a fast receiver.
  const arrivals: number[] = [];
  const fast = await listen((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      arrivals.push(Date.now() - Date.parse(JSON.parse(body).created_at));
      res.writeHead(204).end();
    });
  });
  servers.push(fast.server);
  await post('/v1/api/webhooks', key, { url: fast.url, events: ['key.issued'] });
  for (let i = 0; i < 50; i++) {
    await post('/v1/api/keys', key, { label: `latency ${i}` });
    await new Promise((r) => setTimeout(r, 50));
  }
  for (let i = 0; i < 100 && arrivals.length < 50; i++) await new Promise((r) => setTimeout(r, 100));
  const p50 = pct(arrivals, 50);

  // whoami with nothing queued, then with 1,000 events queued to a receiver that never answers.
  const baseline = await whoamiP99(server.url, key);
  const dead = await listen(() => undefined);
  servers.push(dead.server);
  const other = await post('/v1/admin/tenants', admin, { email: 'bench-hooks-slow@example.com' });
  await post('/v1/api/webhooks', other.api_key, { url: dead.url, events: ['key.issued'] });
  for (let i = 0; i < 1000; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => post('/v1/api/keys', other.api_key, { label: `queued ${i + j}` })));
  const loaded = await whoamiP99(server.url, key);

  await report('Webhooks', [
    row('webhooks', 'event → first delivery attempt, p50 of 50', `${p50} ms`, '', null, '≤ 1000 ms', p50 <= 1000),
    row('webhooks', 'whoami p99 with 1,000 events queued to a receiver that never answers', `${loaded} ms`, `${baseline} ms nothing queued`, loaded / baseline, '≤ 110%', loaded <= baseline * 1.1),
  ]);
} finally {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  if (proc) {
    const gone = new Promise((r) => proc!.once('exit', r));
    proc.kill('SIGTERM');
    await gone;
  }
  await rm(dataDir, { recursive: true, force: true });
}
