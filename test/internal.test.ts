/**
 * The internal endpoint between API replicas and VM hosts: the host takes a live replica credential,
 * validates every call against the contract and answers in the public Error shape; the replica believes
 * only the host the VM's row names and passes the host's customer-facing answers on; with certificates,
 * the two speak TLS (mutual, with a CA). The executor here is a stand-in for a host's guests
 * (test/scaleout.test.ts runs the real one, with real VMs, across processes).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, type ServerType } from '@hono/node-server';
import { Writable } from 'node:stream';
import https from 'node:https';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import type { Server } from 'node:http';
import { buildInternalApp } from '../src/host/internalApp.ts';
import { serveInternalPorts } from '../src/host/internalPorts.ts';
import { RemotePorts } from '../src/replica/remotePorts.ts';
import type { PortAccess } from '../src/domain/previewAccess.ts';
import { FailureThrottle } from '../src/throttle.ts';
import { hostAuthority } from '../src/host/internalAuth.ts';
import { RemoteHosts } from '../src/replica/remoteHosts.ts';
import { InternalClient, type InternalTls } from '../src/replica/internalClient.ts';
import { InternalCredentials } from '../src/domain/internalCredentials.ts';
import { DomainError } from '../src/domain/errors.ts';
import { createLogger } from '../src/log.ts';
import type { VmExecutor } from '../src/domain/runs.ts';
import type { Db } from '../src/store/db.ts';
import { freshDb, ManualClock } from './helpers.ts';

const log = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

const kicked: string[] = [];
const executor: VmExecutor = {
  harnesses: async (vmId) => (vmId === 'vm_up' ? ['echo'] : null),
  kickRuns: (vmId) => void kicked.push(vmId),
  cancelRun: async (_vmId, runId) => {
    if (runId === 'run_explode') throw new Error('secret detail of the host');
    if (runId === 'run_gone') throw new DomainError('vm_not_running', 'the VM is stopped');
  },
  setSecrets: async (_vmId, set) => ({ names: Object.keys(set).filter((k) => set[k] !== null && k !== 'BROKERED'), brokered: 'BROKERED' in set ? ['BROKERED'] : [] }),
};
const probe = async () => ({ usable: true, accel: 'tcg' as const, qemu: 'q', detail: 'ok' });
const clock = new ManualClock();
let db: Db;
let credentials: InternalCredentials;
/** A replica's credential and host_a's; the app is host_a's internal endpoint. */
let TOKEN: string;
let HOST_CREDENTIAL: string;
let app: ReturnType<typeof buildInternalApp>;
let drop: () => Promise<void> = async () => undefined;
after(() => drop());

before(async () => {
  const fresh = await freshDb({ name: 'pglite' });
  db = fresh.db;
  drop = fresh.drop;
  await db.query(`INSERT INTO hosts (host_id, name, accel, vcpus_total, memory_mib_total, disk_gib_total, heartbeat_at) VALUES ('host_a', 'a', 'tcg', 4, 4096, 100, now())`);
  await db.query(`INSERT INTO tenants (tenant_id, email) VALUES ('ten_a', 'a@example.com')`);
  await db.query(
    `INSERT INTO vms (vm_id, tenant_id, host_id, plan, cycle, harness, vcpus, memory_mib, disk_gib, status, desired_state)
     VALUES ('vm_up', 'ten_a', 'host_a', 'starter', 'monthly', 'echo', 1, 1024, 10, 'running', 'running')`,
  );
  await db.query(
    `INSERT INTO templates (template_id, tenant_id, slug, name, harness, visibility, status, source_vm_id)
     VALUES ('tpl_abc', 'ten_a', 't', 't', 'echo', 'private', 'capturing', 'vm_up')`,
  );
  credentials = new InternalCredentials(db, clock);
  TOKEN = await credentials.issue('replica', 'rep_test');
  HOST_CREDENTIAL = await credentials.issue('host', 'host_a');
  app = hostApp();
});

/** host_a's internal endpoint, with its credential of the moment. */
const hostApp = () =>
  buildInternalApp({ authority: hostAuthority({ db, clock, hostId: 'host_a', credential: HOST_CREDENTIAL, credentials }), executor, guest: null, capture: () => undefined, probe, log });

const call = (method: string, path: string, body?: unknown, token = TOKEN) =>
  app.request(path, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });

test('the host validates every internal call and answers in the Error shape', async () => {
  const noToken = await call('GET', '/internal/vms/vm_up/harnesses', undefined, 'wrong');
  assert.equal(noToken.status, 401);
  assert.deepEqual(await noToken.json(), { error: 'unauthorized', message: '' });
  assert.deepEqual(await (await call('GET', '/internal/vms/vm_up/harnesses')).json(), { harnesses: ['echo'] });
  const badId = await call('GET', '/internal/vms/..%2Fetc/harnesses');
  assert.equal(badId.status, 400);
  assert.match((await badId.json()).message, /^id: /);
  const badBody = await call('POST', '/internal/vms/vm_up/runs/cancel', { run_id: '../x' });
  assert.equal(badBody.status, 400);
  assert.match((await badBody.json()).message, /^run_id: /);
  const extra = await call('POST', '/internal/vms/vm_up/secrets', { set: {}, also: 1 });
  assert.equal(extra.status, 400);
  const malformed = await app.request('/internal/vms/vm_up/runs/cancel', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: '{' });
  assert.deepEqual(await malformed.json(), { error: 'invalid_request', message: 'body: malformed JSON' });
  const boom = await call('POST', '/internal/vms/vm_up/runs/cancel', { run_id: 'run_explode' });
  assert.equal(boom.status, 500);
  assert.deepEqual(await boom.json(), { error: 'internal', message: '' });
  assert.equal((await call('GET', '/internal/nothing')).status, 404);
  const capture = await call('POST', '/internal/templates/tpl_abc/capture');
  assert.equal(capture.status, 202);
  assert.equal((await call('GET', '/internal/vms/vm_up/harnesses')).headers.get('x-agentvm-host-credential'), HOST_CREDENTIAL);
  assert.equal((await call('GET', '/internal/vms/vm_up/harnesses', undefined, 'wrong')).headers.get('x-agentvm-host-credential'), null, 'no credential for a caller without one');
  const noVms = buildInternalApp({
    authority: hostAuthority({ db, clock, hostId: 'host_a', credential: HOST_CREDENTIAL, credentials }),
    executor: null,
    guest: null,
    capture: null,
    probe: async () => ({ usable: false, accel: null, qemu: null, detail: 'no qemu' }),
    log,
  });
  const refused = await noVms.request('/internal/vms/vm_up/harnesses', { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(refused.status, 503);
  assert.equal((await refused.json()).error, 'unavailable');
});

/** Serves `a` on loopback (https with `tls`); answers its base URL. */
async function listen(a: { fetch: (req: Request, env?: unknown) => Response | Promise<Response> }, t: { after: (fn: () => Promise<void>) => void }, tls?: { cert: Buffer; key: Buffer; ca: Buffer }): Promise<string> {
  const server: ServerType = await new Promise((resolve) => {
    const s = serve(
      {
        fetch: a.fetch,
        hostname: '127.0.0.1',
        port: 0,
        ...(tls ? { createServer: https.createServer, serverOptions: { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true } } : {}),
      },
      () => resolve(s),
    );
  });
  t.after(() => new Promise<void>((r) => {
    (server as unknown as { closeAllConnections: () => void }).closeAllConnections();
    server.close(() => r());
  }));
  return `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as { port: number }).port}`;
}

test("the replica tells the host of queued runs and passes a host's customer-facing answers on; it believes only the VM's host", async (t) => {
  const url = await listen(app, t);
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [url, 'host_a']);
  const client = new InternalClient(TOKEN);
  t.after(() => client.close());
  const remote = new RemoteHosts(db, client, log);
  assert.deepEqual(await remote.harnesses('vm_up'), ['echo']);
  assert.deepEqual(await remote.setSecrets('vm_up', { A: 'x', B: null, BROKERED: 'k' }), { names: ['A'], brokered: ['BROKERED'] });
  remote.kickRuns('vm_up');
  for (let i = 0; i < 100 && !kicked.length; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(kicked, ['vm_up']);
  await remote.cancelRun('vm_up', 'run_fine');
  // The host's answer for a VM that is not running is the customer's: passed on as itself.
  await assert.rejects(remote.cancelRun('vm_up', 'run_gone'), (err: unknown) => err instanceof DomainError && err.code === 'vm_not_running');
  // A host's internal failure stays the host's: the replica gets an error, not the host's detail.
  await assert.rejects(remote.cancelRun('vm_up', 'run_explode'), (err: unknown) => !(err instanceof DomainError) && !String(err).includes('secret detail'));

  // Another process at the host's address (it answers as the host would, with no credential): not believed.
  const impostor = await listen({ fetch: () => Response.json({ harnesses: ['evil'] }) }, t);
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [impostor, 'host_a']);
  assert.equal(await remote.harnesses('vm_up'), null);
  await assert.rejects(remote.setSecrets('vm_up', { A: 'x' }), /did not come from the VM's host/);
  // A host whose credential the operator revoked is not called at all.
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [url, 'host_a']);
  assert.ok(await credentials.revoke('host', 'host_a'));
  await assert.rejects(remote.setSecrets('vm_up', { A: 'x' }), /no live credential/);
  // Its next start registers it again, with a new credential.
  HOST_CREDENTIAL = await credentials.issue('host', 'host_a');
  app = hostApp();
});

test('with certificates the replica and the host speak mutual TLS: no client certificate, no plain HTTP, no other CA', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-tls-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const openssl = (...args: string[]) => promisify(execFile)('openssl', args, { cwd: dir });
  const ca = async (name: string) => {
    await openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.pem`);
  };
  await ca('ca');
  await ca('other-ca');
  // The host's certificate names 127.0.0.1 (subjectAltName), as a replica checks it.
  await openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=host', '-keyout', 'host.key', '-out', 'host.csr');
  await promisify(execFile)('sh', ['-c', "printf 'subjectAltName=IP:127.0.0.1\\n' > host.ext && openssl x509 -req -in host.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -out host.pem -extfile host.ext"], { cwd: dir });
  await openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=replica', '-keyout', 'replica.key', '-out', 'replica.csr');
  await openssl('x509', '-req', '-in', 'replica.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-out', 'replica.pem');
  await openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=stranger', '-keyout', 'stranger.key', '-out', 'stranger.csr');
  await openssl('x509', '-req', '-in', 'stranger.csr', '-CA', 'other-ca.pem', '-CAkey', 'other-ca.key', '-CAcreateserial', '-days', '1', '-out', 'stranger.pem');
  const pem = (f: string) => readFile(path.join(dir, f));
  const caPem = await pem('ca.pem');
  const url = await listen(app, t, { cert: await pem('host.pem'), key: await pem('host.key'), ca: caPem });
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [url, 'host_a']);
  const replicaTls: InternalTls = { cert: await pem('replica.pem'), key: await pem('replica.key'), ca: caPem };
  const client = new InternalClient(TOKEN, replicaTls);
  t.after(() => client.close());
  assert.deepEqual(await new RemoteHosts(db, client, log).setSecrets('vm_up', { A: 'x' }), { names: ['A'], brokered: [] });
  // A client certificate from another CA, or none, is refused in the handshake (the credential alone is not enough).
  for (const tls of [{ cert: await pem('stranger.pem'), key: await pem('stranger.key'), ca: caPem }, null]) {
    const other = new InternalClient(TOKEN, tls ?? undefined);
    await assert.rejects(
      tls ? other.request({ url, credentialHash: 'x' }, '/internal/vms/vm_up/harnesses', { method: 'GET' }) : fetchWithCa(url, caPem),
      // The host ends the handshake (TLS 1.3 says why: certificate required; a stranger's is cut off).
      (err: Error) => /certificate|alert|ECONNRESET|hang up/i.test(err.message),
    );
    other.close();
  }
  // A replica with TLS does not fall back to plain HTTP, and one without it does not speak to an https host.
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [url.replace('https:', 'http:'), 'host_a']);
  await assert.rejects(new RemoteHosts(db, client, log).setSecrets('vm_up', {}), /TLS-only/);
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [url, 'host_a']);
  const plain = new InternalClient(TOKEN);
  await assert.rejects(new RemoteHosts(db, plain, log).setSecrets('vm_up', {}), /no internal TLS certificates/);
  plain.close();
});

/** A request that trusts the host's CA but shows no certificate of its own. */
function fetchWithCa(url: string, ca: Buffer): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${url}/internal/vms/vm_up/harnesses`, { ca, headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

test("a replica's connection to a port of a guest goes through the VM's host: bytes both ways, the ports listed, nothing listening, a wrong credential", async (t) => {
  // The guest's port here is a TCP echo on loopback, reached by the host's PortAccess (on a real host, the
  // VM's data channel; test/scaleout-shell.test.ts runs that across processes with a real VM).
  const echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  t.after(() => new Promise<void>((r) => echo.close(() => r())));
  const echoPort = (echo.address() as net.AddressInfo).port;
  const ports: PortAccess = {
    connect: async (_vmId, port) => (port === 8080 ? net.connect(echoPort, '127.0.0.1') : null),
    list: async () => [{ port: 8080, process: 'node' }],
  };
  const authority = hostAuthority({ db, clock, hostId: 'host_a', credential: HOST_CREDENTIAL, credentials });
  const withPorts = buildInternalApp({ authority, executor, guest: null, ports, capture: () => undefined, probe, log });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: withPorts.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  serveInternalPorts(server as Server, { authority, throttle: new FailureThrottle(), ports, log });
  t.after(() => new Promise<void>((r) => ((server as unknown as { closeAllConnections: () => void }).closeAllConnections(), server.close(() => r()))));
  await db.query('UPDATE hosts SET internal_url = $1 WHERE host_id = $2', [`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, 'host_a']);
  const client = new InternalClient(TOKEN);
  t.after(() => client.close());
  const remote = new RemotePorts(db, client, log);

  const socket = (await remote.connect('vm_up', 8080))!;
  assert.ok(socket, 'connected');
  const back: Buffer[] = [];
  socket.on('data', (d: Buffer) => back.push(d));
  const ended = new Promise((r) => socket.once('end', r));
  socket.end(Buffer.from('hello through the host'));
  await ended;
  assert.equal(Buffer.concat(back).toString(), 'hello through the host');
  assert.equal(await remote.connect('vm_up', 9999), null, 'nothing listens: null (the preview answers 502 port_closed)');
  assert.deepEqual(await remote.list('vm_up'), [{ port: 8080, process: 'node' }]);
  const wrong = new InternalClient('avm_internal_wrong');
  t.after(() => wrong.close());
  await assert.rejects(new RemotePorts(db, wrong, log).connect('vm_up', 8080), (err: unknown) => !(err instanceof DomainError) && /401/.test(String(err)));
});
