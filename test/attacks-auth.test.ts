/**
 * Attacks on authentication, each as an attacker would make it, against a real server on loopback:
 * a flood of wrong Bearers, guessing a sign-in code, telling known emails from unknown ones, a huge form
 * before sign-in, and, on a VM host's internal endpoint, another host's credential, a revoked one and a
 * VM placed elsewhere. Client addresses are loopback addresses of their own (127.0.0.x).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Writable } from 'node:stream';
import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { buildCoreServices, buildServices, type Services } from '../src/domain/services.ts';
import { buildApp } from '../src/api/app.ts';
import { createLogger } from '../src/log.ts';
import { createMailer } from '../src/mail.ts';
import { randomBase62 } from '../src/domain/ids.ts';
import type { Db } from '../src/store/db.ts';
import type { Mailer } from '../src/domain/login.ts';
import { buildInternalApp } from '../src/host/internalApp.ts';
import { hostAuthority } from '../src/host/internalAuth.ts';
import { InternalCredentials } from '../src/domain/internalCredentials.ts';
import type { VmExecutor } from '../src/domain/runs.ts';
import { countTakingVms } from '../src/store/hosts.ts';
import { freshDb, ManualClock } from './helpers.ts';
import { FailureThrottle } from '../src/throttle.ts';

const quiet = () => createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One request from a loopback address of its own; `hold`: send this much of the body and wait for the answer. */
function send(
  url: string,
  o: { method?: string; from?: string; headers?: Record<string, string>; body?: string | Buffer; hold?: { bytes: number; chunked?: boolean; declared?: number } } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.hold?.declared !== undefined) headers['content-length'] = String(o.hold.declared);
    const req = http.request(url, { method: o.method ?? 'GET', headers, localAddress: o.from ?? '127.0.0.1', agent: false });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer in 5 s to ${o.method ?? 'GET'} ${url}`));
    }, 5000);
    req.on('error', (err) => (o.hold ? undefined : reject(err)));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', () => undefined);
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    if (o.hold) {
      // The attacker sends part of a huge body and keeps the connection open: a server that reads on waits for ever.
      req.write(Buffer.alloc(o.hold.bytes, 0x61));
    } else {
      req.end(o.body);
    }
  });
}

async function listen(app: { fetch: (req: Request, env?: unknown) => Response | Promise<Response> }): Promise<{ url: string; server: ServerType }> {
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const closeServer = (s: ServerType) =>
  new Promise<void>((r) => {
    (s as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
    s.close(() => r());
  });

/** Counts the database's queries (every statement a request costs goes through db.query or a transaction). */
function countQueries(db: Db): { n: number } {
  const counter = { n: 0 };
  const query = db.query.bind(db);
  const transaction = db.transaction.bind(db);
  db.query = ((...args: Parameters<Db['query']>) => (counter.n++, query(...args))) as Db['query'];
  db.transaction = ((fn: Parameters<Db['transaction']>[0]) => (counter.n++, transaction(fn))) as Db['transaction'];
  return counter;
}

describe('attacks on the API and the console before authentication', () => {
  let db: Db;
  let drop: () => Promise<void>;
  let services: Services;
  let url: string;
  let server: ServerType;
  const clock = new ManualClock();
  const mail: { to: string; text: string }[] = [];
  const codeFor = (email: string) => /code is (\d{6})/.exec(mail.filter((m) => m.to === email).at(-1)!.text)![1];
  const adminToken = `avm_admin_${randomBase62(40)}`;
  let tenant: { email: string; key: string };

  before(async () => {
    ({ db, drop } = await freshDb({ name: 'pglite' }));
    const mailer: Mailer = { send: async (to, _s, text) => void mail.push({ to, text }) };
    services = buildServices(buildCoreServices(db, { clock }), { driver: async () => ({ usable: true, accel: 'tcg', qemu: 'q', detail: 'test' }) }, { mailer });
    const app = buildApp({ services, log: quiet(), adminToken, rateLimit: { perSecond: 10_000, burst: 10_000 } });
    ({ url, server } = await listen(app));
    const created = await send(`${url}/v1/admin/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'victim@example.com' }),
    });
    assert.equal(created.status, 201, created.text);
    tenant = { email: 'victim@example.com', key: JSON.parse(created.text).api_key };
  });
  after(async () => {
    await closeServer(server);
    await services.runFeed.close();
    await services.vmFeed.close();
    await drop();
  });

  test('a flood of wrong Bearers: 30 failures a minute per address, then 429 with Retry-After and not one database query', async () => {
    const from = '127.0.0.11';
    const wrong = () => ({ authorization: `Bearer avm_live_${randomBase62(40)}` });
    for (let i = 0; i < 30; i++) assert.equal((await send(`${url}/v1/api/whoami`, { from, headers: wrong() })).status, 401, `wrong key ${i + 1}`);
    const queries = countQueries(db);
    for (let i = 0; i < 50; i++) {
      const res = await send(`${url}/v1/api/whoami`, { from, headers: wrong() });
      assert.equal(res.status, 429, `wrong key ${31 + i}`);
      assert.equal(JSON.parse(res.text).error, 'rate_limited');
      assert.ok(Number(res.headers['retry-after']) >= 1 && Number(res.headers['retry-after']) <= 60, String(res.headers['retry-after']));
    }
    assert.equal(queries.n, 0, 'a refused Bearer costs no database query');
    // Wrong admin tokens, the MCP endpoint and a right key from that address are refused alike, before any query.
    assert.equal((await send(`${url}/v1/admin/tenants`, { from, method: 'POST', headers: { authorization: `Bearer avm_admin_${randomBase62(40)}` } })).status, 429);
    assert.equal((await send(`${url}/v1/mcp`, { from, method: 'POST', headers: wrong() })).status, 429);
    assert.equal((await send(`${url}/v1/api/whoami`, { from, headers: { authorization: `Bearer ${tenant.key}` } })).status, 429);
    assert.equal(queries.n, 0);
    // Another address is not affected.
    assert.equal((await send(`${url}/v1/api/whoami`, { from: '127.0.0.12', headers: { authorization: `Bearer ${tenant.key}` } })).status, 200);
    // Once the minute has passed, the address is heard again.
    clock.t += 61_000;
    assert.equal((await send(`${url}/v1/api/whoami`, { from, headers: { authorization: `Bearer ${tenant.key}` } })).status, 200);
  });

  test('behind a trusted reverse proxy, failures count by the client X-Forwarded-For names; from any other peer the header is not read', async () => {
    const proxy = '127.0.0.21';
    const throttle = new FailureThrottle(() => clock.now().getTime(), undefined, undefined, [proxy]);
    const behind = await listen(buildApp({ services, log: quiet(), adminToken, rateLimit: { perSecond: 10_000, burst: 10_000 }, throttle }));
    try {
      const wrong = () => ({ authorization: `Bearer avm_live_${randomBase62(40)}` });
      // The proxy appends the address it heard from; what the client wrote before it is not trusted.
      const via = (client: string, claimed = '203.0.113.9') => ({ 'x-forwarded-for': `${claimed}, ${client}` });
      for (let i = 0; i < 30; i++) assert.equal((await send(`${behind.url}/v1/api/whoami`, { from: proxy, headers: { ...wrong(), ...via('198.51.100.7') } })).status, 401);
      const key = { authorization: `Bearer ${tenant.key}` };
      assert.equal((await send(`${behind.url}/v1/api/whoami`, { from: proxy, headers: { ...key, ...via('198.51.100.7', '198.51.100.99') } })).status, 429, 'that client is refused');
      assert.equal((await send(`${behind.url}/v1/api/whoami`, { from: proxy, headers: { ...key, ...via('198.51.100.8', '198.51.100.7') } })).status, 200, 'another client behind the same proxy is not');
      // A peer that is not a trusted proxy is counted by its own address, whatever it writes.
      assert.equal((await send(`${behind.url}/v1/api/whoami`, { from: '127.0.0.22', headers: { ...key, 'x-forwarded-for': '198.51.100.7' } })).status, 200);
    } finally {
      await closeServer(behind.server);
    }
  });

  test('guessing a sign-in code: after 10 wrong codes for an email in an hour, even the right code is refused until the hour has passed', async () => {
    clock.t += 2 * 3600_000;
    const from = '127.0.0.13';
    const post = (path: string, body: unknown) =>
      send(`${url}${path}`, { from, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    let wrongs = 0;
    while (wrongs < 10) {
      assert.equal((await post('/v1/auth/login/start', { email: tenant.email })).status, 200);
      const code = codeFor(tenant.email);
      for (let i = 0; i < 5 && wrongs < 10; i++, wrongs++) {
        assert.equal((await post('/v1/auth/login/complete', { email: tenant.email, code: code === '000000' ? '111111' : '000000' })).status, 401);
      }
      clock.t += 60_000;
    }
    assert.equal((await post('/v1/auth/login/start', { email: tenant.email })).status, 200);
    const right = await post('/v1/auth/login/complete', { email: tenant.email, code: codeFor(tenant.email) });
    assert.equal(right.status, 429, right.text);
    assert.equal(JSON.parse(right.text).error, 'rate_limited');
    const retry = Number(right.headers['retry-after']);
    assert.ok(retry > 3000 && retry <= 3600, `Retry-After ${retry}`);
    // The console's sign-in is the same service: refused there too.
    await assert.rejects(services.sessions.signIn(tenant.email, codeFor(tenant.email)), { code: 'rate_limited' });
    // After the hour, a new code works.
    clock.t += retry * 1000;
    assert.equal((await post('/v1/auth/login/start', { email: tenant.email })).status, 200);
    assert.equal((await post('/v1/auth/login/complete', { email: tenant.email, code: codeFor(tenant.email) })).status, 201);
  });

  test('known and unknown emails get the same answers, sign-in start after sign-in start and wrong code after wrong code', async () => {
    clock.t += 2 * 3600_000;
    const from = '127.0.0.14';
    const post = (path: string, body: unknown) =>
      send(`${url}${path}`, { from, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const shape = (a: Answer) => ({ status: a.status, body: a.text.replace(/"expires_in_s":\d+/, ''), retry: a.headers['retry-after'] });
    for (let i = 0; i < 7; i++) {
      const known = shape(await post('/v1/auth/login/start', { email: tenant.email }));
      const unknown = shape(await post('/v1/auth/login/start', { email: 'nobody-here@example.com' }));
      assert.deepEqual(unknown, known, `start ${i + 1}`);
    }
    clock.t += 16 * 60_000;
    for (let i = 0; i < 12; i++) {
      const known = shape(await post('/v1/auth/login/complete', { email: tenant.email, code: '000000' }));
      const unknown = shape(await post('/v1/auth/login/complete', { email: 'nobody-here@example.com', code: '000000' }));
      assert.deepEqual(unknown, known, `wrong code ${i + 1}`);
    }
  });

  test('a 2 MiB form before sign-in is 413 at the first MiB, declared or chunked, on the console and the API', async () => {
    const MiB = 1024 * 1024;
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const path of ['/console/login', '/console/login/code']) {
      const declared = await send(`${url}${path}`, { method: 'POST', headers: form, hold: { bytes: 64 * 1024, declared: 2 * MiB } });
      assert.equal(declared.status, 413, `${path}: ${declared.text.slice(0, 200)}`);
      const chunked = await send(`${url}${path}`, { method: 'POST', headers: form, hold: { bytes: MiB + 64 * 1024, chunked: true } });
      assert.equal(chunked.status, 413, path);
    }
    // The API answers in its Error shape; MCP too (before authentication), at its own 6 MiB (its file tools carry 4 MiB in base64).
    for (const [path, cap] of [['/v1/auth/login/start', MiB], ['/v1/api/vms', MiB], ['/v1/mcp', 6 * MiB]] as const) {
      const res = await send(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, hold: { bytes: cap + 64 * 1024, chunked: true } });
      assert.equal(res.status, 413, path);
      assert.equal(JSON.parse(res.text).error, 'payload_too_large', path);
    }
    // A form of ordinary size still works.
    assert.equal((await send(`${url}/console/login`)).status, 200);
  });
});

describe('attacks on a VM host’s internal endpoint', () => {
  let db: Db;
  let drop: () => Promise<void>;
  let url: string;
  let server: ServerType;
  const clock = new ManualClock();
  const touched: string[] = [];
  const executor: VmExecutor = {
    harnesses: async (vmId) => (touched.push(`harnesses ${vmId}`), ['echo']),
    kickRuns: (vmId) => void touched.push(`runs ${vmId}`),
    cancelRun: async (vmId) => void touched.push(`cancel ${vmId}`),
    setSecrets: async (vmId, set) => (touched.push(`secrets ${vmId}`), { names: Object.keys(set), brokered: [] }),
  };
  let creds: InternalCredentials;
  let replica: string;
  const adminToken = `avm_admin_${randomBase62(40)}`;
  let api: (method: string, path: string) => Promise<{ status: number; body: any }>;
  let closeFeeds: () => Promise<void>;
  let otherHost: string;

  before(async () => {
    ({ db, drop } = await freshDb({ name: 'pglite' }));
    for (const h of ['host_a', 'host_b']) {
      await db.query(
        `INSERT INTO hosts (host_id, name, accel, vcpus_total, memory_mib_total, disk_gib_total, heartbeat_at) VALUES ($1, $1, 'tcg', 4, 4096, 100, now())`,
        [h],
      );
    }
    await db.query(`INSERT INTO tenants (tenant_id, email) VALUES ('ten_a', 'a@example.com')`);
    for (const [vm, host] of [['vm_mine', 'host_a'], ['vm_theirs', 'host_b']]) {
      await db.query(
        `INSERT INTO vms (vm_id, tenant_id, host_id, plan, cycle, harness, vcpus, memory_mib, disk_gib, status, desired_state)
         VALUES ($1, 'ten_a', $2, 'starter', 'monthly', 'echo', 1, 1024, 10, 'running', 'running')`,
        [vm, host],
      );
    }
    creds = new InternalCredentials(db, clock);
    const own = await creds.issue('host', 'host_a');
    otherHost = await creds.issue('host', 'host_b');
    replica = await creds.issue('replica', 'rep_one');
    const app = buildInternalApp({
      authority: hostAuthority({ db, clock, hostId: 'host_a', credential: own, credentials: creds }),
      executor,
      guest: null,
      capture: () => undefined,
      probe: async () => ({ usable: true, accel: 'tcg', qemu: 'q', detail: 'ok' }),
      log: quiet(),
    });
    ({ url, server } = await listen(app));
    const services = buildServices(buildCoreServices(db, { clock }), { driver: async () => ({ usable: true, accel: 'tcg', qemu: 'q', detail: 'test' }) });
    const apiApp = buildApp({ services, log: quiet(), adminToken, rateLimit: { perSecond: 10_000, burst: 10_000 } });
    api = async (method, path) => {
      const res = await apiApp.request(path, { method, headers: { authorization: `Bearer ${adminToken}` } });
      return { status: res.status, body: await res.json() };
    };
    closeFeeds = async () => {
      await services.runFeed.close();
      await services.vmFeed.close();
    };
  });
  after(async () => {
    await closeServer(server);
    await closeFeeds();
    await drop();
  });

  const call = (path: string, token: string, method = 'GET', body?: unknown) =>
    send(`${url}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });

  test("another host's credential opens nothing on this host; a revoked replica credential is refused at once", async () => {
    touched.length = 0;
    const asHost = await call('/internal/vms/vm_mine/secrets', otherHost, 'POST', { set: { STOLEN: 'x' } });
    assert.equal(asHost.status, 401);
    assert.deepEqual(JSON.parse(asHost.text), { error: 'unauthorized', message: '' });
    const ok = await call('/internal/vms/vm_mine/harnesses', replica);
    assert.equal(ok.status, 200);
    assert.deepEqual(touched, ['harnesses vm_mine']);
    // The operator revokes the replica's credential through the admin API.
    const revokedRow = await api('DELETE', '/v1/admin/replicas/rep_one/credential');
    assert.equal(revokedRow.status, 200);
    assert.equal(revokedRow.body.holder_id, 'rep_one');
    assert.ok(revokedRow.body.revoked_at);
    assert.equal((await api('DELETE', '/v1/admin/replicas/rep_one/credential')).status, 404, 'nothing live to revoke');
    clock.t += 1000; // past the host's cache of credentials
    const revoked = await call('/internal/vms/vm_mine/harnesses', replica);
    assert.equal(revoked.status, 401);
    assert.deepEqual(touched, ['harnesses vm_mine']);
    replica = await creds.issue('replica', 'rep_one');
    const listed = (await api('GET', '/v1/admin/internal-credentials')).body.credentials;
    assert.deepEqual(listed.map((c: { holder_id: string; revoked_at: string | null }) => [c.holder_id, c.revoked_at]).sort(), [['host_a', null], ['host_b', null], ['rep_one', null]]);
    assert.ok(!JSON.stringify(listed).includes(replica), 'never the secret');
  });

  test('a host whose credential the operator revoked takes no new VMs', async () => {
    await db.query(`UPDATE hosts SET internal_url = 'http://127.0.0.1:9' WHERE host_id = 'host_b'`);
    const taking = () => countTakingVms(db, new Date(Date.now() - 60_000));
    assert.equal(await taking(), 2);
    assert.equal((await api('DELETE', '/v1/admin/hosts/host_b/credential')).status, 200);
    assert.equal(await taking(), 1);
    await creds.issue('host', 'host_b');
    assert.equal(await taking(), 2);
  });

  test('a host asked about a VM placed on another host refuses and does nothing', async () => {
    touched.length = 0;
    for (const [method, path, body] of [
      ['GET', '/internal/vms/vm_theirs/harnesses'],
      ['POST', '/internal/vms/vm_theirs/runs'],
      ['POST', '/internal/vms/vm_theirs/runs/cancel', { run_id: 'run_x' }],
      ['POST', '/internal/vms/vm_theirs/secrets', { set: { A: 'b' } }],
      ['GET', '/internal/vms/vm_theirs/files?path=/etc/passwd'],
      ['GET', '/internal/vms/vm_nowhere/harnesses'],
    ] as const) {
      const res = await call(path, replica, method, body);
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal(JSON.parse(res.text).error, 'not_found');
    }
    assert.deepEqual(touched, []);
    assert.equal((await call('/internal/vms/vm_mine/harnesses', replica)).status, 200);
  });

  test('a flood of wrong credentials on the internal endpoint is 429 after 30', async () => {
    const from = '127.0.0.21';
    for (let i = 0; i < 30; i++) {
      assert.equal((await send(`${url}/internal/vms/vm_mine/harnesses`, { from, headers: { authorization: `Bearer avm_int_${randomBase62(40)}` } })).status, 401);
    }
    const limited = await send(`${url}/internal/vms/vm_mine/harnesses`, { from, headers: { authorization: `Bearer ${replica}` } });
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
  });
});

describe('timing of a sign-in start through a slow mail server', () => {
  test('a known email answers as fast as an unknown one: the mail goes after the answer', async (t) => {
    const { SMTPServer } = await import('smtp-server');
    const DELAY_MS = 400;
    const peer = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, _session, callback) {
        stream.on('data', () => undefined);
        stream.on('end', () => setTimeout(() => callback(), DELAY_MS));
      },
    });
    const port: number = await new Promise((resolve) => peer.listen(0, '127.0.0.1', () => resolve((peer.server.address() as AddressInfo).port)));
    t.after(() => new Promise<void>((r) => peer.close(() => r())));
    const { db, drop } = await freshDb({ name: 'pglite' });
    const log = quiet();
    const services = buildServices(buildCoreServices(db), { driver: async () => ({ usable: true, accel: 'tcg', qemu: 'q', detail: 'test' }) }, {
      mailer: createMailer(`smtp://127.0.0.1:${port}`, 'agentvm <noreply@example.com>', log),
    });
    t.after(async () => {
      await services.runFeed.close();
      await services.vmFeed.close();
      await drop();
    });
    await services.tenants.create('slowmail@example.com');
    const timed = async (email: string) => {
      const started = performance.now();
      await services.login.start(email);
      return performance.now() - started;
    };
    const known: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 4; i++) {
      known.push(await timed('slowmail@example.com'));
      unknown.push(await timed(`nobody${i}@example.com`));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(`sign-in start: known ${median(known).toFixed(1)} ms, unknown ${median(unknown).toFixed(1)} ms (mail server answers after ${DELAY_MS} ms)`);
    assert.ok(Math.abs(median(known) - median(unknown)) < DELAY_MS / 4, `known ${known.map(Math.round)} ms against unknown ${unknown.map(Math.round)} ms`);
  });
});
