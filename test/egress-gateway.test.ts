/**
 * The egress gateway without a VM: a client speaks to a VM's gateway socket as QEMU's forward does,
 * and everything it reaches is on loopback, named by pins (no name is ever looked up in DNS here).
 * The same gateway with real guests and real agents is in egress.test.ts.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { mkdtemp, rm, stat, readFile } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { EgressGateway } from '../src/host/egress/gateway.ts';
import { HostCredentials } from '../src/host/egress/credentials.ts';
import { SecretBox } from '../src/host/egress/secretBox.ts';
import { DenyList } from '../src/domain/denyList.ts';
import { canonicalIp, embeddedV4 } from '../src/domain/ipAddress.ts';
import { allowEntryProblem, decideName, parsePins, policyProblem } from '../src/domain/egress.ts';
import { providerHosts, providerUrlsFromEnv } from '../src/harness/providers.ts';
import { createLogger } from '../src/log.ts';
import * as vmStore from '../src/store/vms.ts';
import * as egressStore from '../src/store/egress.ts';
import { freshDb, insertVm } from './helpers.ts';
import type { Db } from '../src/store/db.ts';

const log = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

test('allow entries: lowercase names and wildcards under a registrable domain only', () => {
  for (const ok of ['api.anthropic.com', '*.example.org', 'registry.npmjs.org', 'a-b.c0.io', '*.github.com']) assert.equal(allowEntryProblem(ok), null, ok);
  const bad: Record<string, RegExp> = {
    '*': /wildcard alone/,
    '*.com': /public suffix/,
    '*.co.uk': /public suffix/,
    '*.github.io': /public suffix/,
    'API.example.com': /lowercase/,
    '10.0.0.1': /IP address/,
    '::1': /invalid label|IP address/,
    'a..b': /empty label/,
    'a.*.b': /first label/,
    '-a.com': /invalid label/,
    [`${'a'.repeat(64)}.com`]: /invalid label/,
    [`${'a.'.repeat(127)}com`]: /longer than 253/,
    '': /empty/,
  };
  for (const [entry, why] of Object.entries(bad)) assert.match(allowEntryProblem(entry) ?? 'accepted', why, entry);
  assert.deepEqual(policyProblem({ mode: 'allowlist', allow: Array.from({ length: 101 }, (_, i) => `h${i}.example.com`) }), {
    field: 'egress.allow',
    message: 'holds at most 100 entries',
  });
  assert.equal(policyProblem({ mode: 'allowlist', allow: ['ok.example.com', '*.com'] })?.field, 'egress.allow[1]');
});

test('the decision on a name follows the mode and the allowlist', () => {
  const allow = { mode: 'allowlist' as const, allow: ['api.example.com', '*.example.org'] };
  assert.equal(decideName(allow, 'api.example.com').allowed, true);
  assert.equal(decideName(allow, 'API.Example.com.').allowed, true);
  assert.equal(decideName(allow, 'x.y.example.org').allowed, true);
  assert.equal(decideName(allow, 'example.org').allowed, false, 'a wildcard is for subdomains only');
  assert.equal(decideName(allow, 'evilexample.org').allowed, false);
  assert.equal(decideName(allow, 'other.example.com').allowed, false);
  assert.equal(decideName(allow, '93.184.216.34').allowed, false);
  assert.equal(decideName({ mode: 'none', allow: ['api.example.com'] }, 'api.example.com').allowed, false);
  assert.equal(decideName({ mode: 'public', allow: [] }, 'anything.example').allowed, true);
});

test('the deny list holds every range of the policy, IPv4 inside IPv6 included, and the host itself', () => {
  const deny = new DenyList();
  for (const addr of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1', '169.254.169.254', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', 'fc00::1', 'fd12::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1', '2002:a00:1::', '::']) {
    assert.ok(deny.reason(addr), `${addr} must be denied`);
  }
  for (const addr of ['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '172.32.0.1', '100.128.0.1']) assert.equal(deny.reason(addr), null, addr);
  for (const own of Object.values(os.networkInterfaces()).flatMap((l) => l ?? [])) assert.ok(deny.reason(own.address), `own ${own.address}`);
  assert.equal(embeddedV4('::ffff:10.0.0.1'), '10.0.0.1');
});

test('pins and provider settings are checked when read', () => {
  assert.deepEqual([...parsePins('a.test=127.0.0.1, B.test=::1')], [['a.test', '127.0.0.1'], ['b.test', '::1']]);
  assert.throws(() => parsePins('a.test'), /not name=address/);
  assert.throws(() => parsePins('a.test=not-an-ip'), /not name=address/);
  assert.throws(() => providerUrlsFromEnv({ AGENTVM_PROVIDER_OPENAI_URL: 'ftp://x' }), /AGENTVM_PROVIDER_OPENAI_URL/);
  assert.equal(providerUrlsFromEnv({ AGENTVM_PROVIDER_ANTHROPIC_URL: 'http://127.0.0.1:9/' }).anthropic, 'http://127.0.0.1:9', 'an IP literal is the operator\'s choice');
  // Policies name providers by their public API hosts, whatever URL the operator set.
  assert.deepEqual(providerHosts('claude-code'), ['api.anthropic.com']);
  assert.deepEqual(providerHosts('opencode'), ['api.anthropic.com', 'api.openai.com', 'generativelanguage.googleapis.com']);
  assert.deepEqual(providerHosts('echo'), []);
});

test('sealed secrets open only with their key, for their VM and name; the generated key file is 0600', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-box-'));
  try {
    const box = await SecretBox.open(dir);
    assert.equal((await stat(path.join(dir, 'secrets.key'))).mode & 0o777, 0o600);
    const again = await SecretBox.open(dir);
    const sealed = box.seal('sk-real', 'vm_a/KEY');
    assert.ok(!sealed.includes('sk-real'));
    assert.equal(again.open(sealed, 'vm_a/KEY'), 'sk-real');
    assert.throws(() => box.open(sealed, 'vm_b/KEY'));
    const other = await SecretBox.open(dir, randomBytes(32).toString('hex'));
    assert.throws(() => other.open(sealed, 'vm_a/KEY'), /another secrets key/);
    await assert.rejects(SecretBox.open(dir, 'short'), /32 bytes/);
    assert.match(await readFile(path.join(dir, 'secrets.key'), 'utf8'), /^[0-9a-f]{64}\n$/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

// ---- the gateway itself ----

let db: Db;
let drop: () => Promise<void>;
let dir: string;
let gateway: EgressGateway;
let credentials: HostCredentials;
let upstream: http.Server;
let upstreamPort: number;
let provider: http.Server;
let providerPort: number;
const seenByProvider: Array<{ path: string; headers: http.IncomingHttpHeaders }> = [];
let vmId: string;
let sock: string;

before(async () => {
  ({ db, drop } = await freshDb({ name: 'pglite' }));
  dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-gw-'));
  upstream = http.createServer((req, res) => res.end(`upstream ${req.method} ${req.url}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as net.AddressInfo).port;
  provider = http.createServer((req, res) => {
    seenByProvider.push({ path: req.url!, headers: req.headers });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    setTimeout(() => res.end('data: two\n\n'), 50);
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  providerPort = (provider.address() as net.AddressInfo).port;
  const [{ tenant_id: tenantId }] = await db.query<{ tenant_id: string }>(
    `INSERT INTO tenants (tenant_id, email, created_at) VALUES ('ten_gw', 'gw@example.com', now()) RETURNING tenant_id`,
  );
  vmId = await insertVm(db, tenantId);
  await db.query(`UPDATE vms SET harness = 'claude-code' WHERE vm_id = $1`, [vmId]);
  credentials = new HostCredentials(db, await SecretBox.open(dir));
  gateway = new EgressGateway({
    db,
    credentials,
    providerUrls: { anthropic: `http://anthropic.test:${providerPort}/base`, openai: 'http://openai.test:1', google: 'http://google.test:1' },
    pins: parsePins('allowed.test=127.0.0.1,anthropic.test=127.0.0.1,pinned-denied.test=127.0.0.1'),
    log,
  });
  sock = path.join(dir, 'egress.sock');
  await gateway.attach(vmId, sock);
});

after(async () => {
  await gateway.close();
  upstream.close();
  provider.close();
  await drop();
  await rm(dir, { recursive: true, force: true });
});

const setPolicy = (mode: 'none' | 'allowlist' | 'public', allow: string[]) =>
  db.query('UPDATE vms SET egress = $2 WHERE vm_id = $1', [vmId, JSON.stringify({ mode, allow })]);

/** One raw exchange on the VM's gateway socket: what a guest program sends through its proxy. */
function exchange(request: string, ms = 5000): Promise<{ text: string; elapsed: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const s = net.connect(sock);
    let text = '';
    s.on('data', (c) => (text += c.toString()));
    s.on('end', () => resolve({ text, elapsed: Date.now() - t0 }));
    s.on('error', reject);
    s.setTimeout(ms, () => (s.destroy(), resolve({ text, elapsed: Date.now() - t0 })));
    s.write(request);
  });
}

/** A CONNECT tunnel, then one HTTP request inside it. */
async function tunnel(hostPort: string): Promise<{ status: number; body: string; elapsed: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const s = net.connect(sock);
    let buf = '';
    let open = false;
    s.on('data', (c) => {
      buf += c.toString();
      if (!open && buf.includes('\r\n\r\n')) {
        const status = Number(buf.slice(9, 12));
        if (status !== 200) return resolve({ status, body: buf.split('\r\n\r\n')[1], elapsed: Date.now() - t0 });
        open = true;
        buf = '';
        s.write(`GET /inside HTTP/1.1\r\nhost: ${hostPort}\r\nconnection: close\r\n\r\n`);
      }
    });
    s.on('end', () => resolve({ status: 200, body: buf, elapsed: Date.now() - t0 }));
    s.on('error', reject);
    s.write(`CONNECT ${hostPort} HTTP/1.1\r\nhost: ${hostPort}\r\n\r\n`);
  });
}

test('CONNECT to an allowlisted pinned name is tunnelled; anything else is refused at once with 403 and logged', async () => {
  await setPolicy('allowlist', ['allowed.test']);
  const ok = await tunnel(`allowed.test:${upstreamPort}`);
  assert.equal(ok.status, 200);
  assert.match(ok.body, /upstream GET \/inside/);
  const refused: Array<[string, RegExp]> = [
    [`pinned-denied.test:${upstreamPort}`, /policy denies pinned-denied\.test/],
    [`127.0.0.1:${upstreamPort}`, /policy denies 127\.0\.0\.1/],
    ['10.0.0.1:80', /policy denies 10\.0\.0\.1/],
    ['169.254.169.254:80', /policy denies 169\.254\.169\.254/],
    ['[::1]:80', /policy denies ::1/],
  ];
  for (const [target, why] of refused) {
    const r = await tunnel(target);
    assert.equal(r.status, 403, target);
    assert.match(r.body, why);
    // Refused before any connection is tried (one would hang for its connect timeout): well under 5 s however slow the machine.
    assert.ok(r.elapsed < 5000, `${target} refused in ${r.elapsed} ms`);
  }
  const log = await egressStore.listLog(db, vmId, 50);
  assert.equal(log.data.filter((e) => e.decision === 'denied').length, refused.length);
  const allowed = log.data.find((e) => e.decision === 'allowed')!;
  assert.equal(allowed.host, 'allowed.test');
  assert.equal(allowed.port, upstreamPort);
  await until(async () => (await egressStore.listLog(db, vmId, 50)).data.find((e) => e.decision === 'allowed')!.bytes_in > 0);
  // The bytes the tunnel carried, each way: the request inside it, and the answer the client got.
  const logged = (await egressStore.listLog(db, vmId, 50)).data.find((e) => e.decision === 'allowed')!;
  assert.equal(logged.bytes_out, Buffer.byteLength(`GET /inside HTTP/1.1\r\nhost: allowed.test:${upstreamPort}\r\nconnection: close\r\n\r\n`));
  assert.equal(logged.bytes_in, Buffer.byteLength(ok.body));
});

test('in public mode the deny list still holds: loopback, private, link-local and metadata addresses, also inside IPv6', async () => {
  await setPolicy('public', []);
  for (const target of [`127.0.0.1:${upstreamPort}`, '10.0.0.1:80', '192.168.0.1:443', '169.254.169.254:80', '[::ffff:127.0.0.1]:80', '[fe80::1]:80']) {
    const r = await tunnel(target);
    assert.equal(r.status, 403, target);
    assert.match(r.body, /^agentvm egress policy denies /);
  }
  const last = (await egressStore.listLog(db, vmId, 1)).data[0];
  assert.match(last.reason, /link-local/);
});

test('absolute-form HTTP is proxied by policy; a policy change applies to the next connection', async () => {
  await setPolicy('allowlist', ['allowed.test']);
  const ok = await exchange(`GET http://allowed.test:${upstreamPort}/plain HTTP/1.1\r\nhost: allowed.test\r\nconnection: close\r\n\r\n`);
  assert.match(ok.text, /^HTTP\/1\.1 200/);
  assert.match(ok.text, /upstream GET \/plain/);
  await setPolicy('allowlist', []);
  const t0 = Date.now();
  const denied = await exchange(`GET http://allowed.test:${upstreamPort}/plain HTTP/1.1\r\nhost: allowed.test\r\n\r\n`);
  assert.match(denied.text, /^HTTP\/1\.1 403/);
  assert.match(denied.text, /agentvm egress policy denies allowed\.test\n$/);
  assert.ok(Date.now() - t0 < 1000);
});

test('a brokered request carries the real key to the provider, streams, and the log names no key', async () => {
  // The policy names the public API host; the request goes to the operator's URL.
  await setPolicy('allowlist', ['api.anthropic.com']);
  const missing = await exchange(`POST /providers/anthropic/v1/messages HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`);
  assert.match(missing.text, /^HTTP\/1\.1 401/);
  assert.match(missing.text, /no ANTHROPIC_API_KEY/);
  const out = await credentials.apply(vmId, { ANTHROPIC_API_KEY: 'sk-ant-real-123', OTHER: 'plain' }, async (guest) => {
    assert.deepEqual(guest, { ANTHROPIC_API_KEY: null, OTHER: 'plain' }, 'the brokered key never goes to the guest');
    return ['OTHER'];
  });
  assert.deepEqual(out, { names: ['OTHER'], brokered: ['ANTHROPIC_API_KEY'] });
  const [{ sealed }] = await db.query<{ sealed: string }>('SELECT sealed FROM vm_brokered_secrets WHERE vm_id = $1', [vmId]);
  assert.ok(!sealed.includes('sk-ant-real-123'));
  const res = await exchange(
    `POST /providers/anthropic/v1/messages?beta=true HTTP/1.1\r\nhost: gateway.agentvm.internal:3128\r\nx-api-key: placeholder\r\nauthorization: Bearer placeholder\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
  );
  assert.match(res.text, /^HTTP\/1\.1 200/);
  assert.match(res.text, /data: one[\s\S]*data: two/);
  const seen = seenByProvider.at(-1)!;
  assert.equal(seen.path, '/base/v1/messages?beta=true');
  assert.equal(seen.headers['x-api-key'], 'sk-ant-real-123');
  assert.equal(seen.headers.authorization, undefined);
  assert.equal(seen.headers.host, `anthropic.test:${providerPort}`);
  // Through the proxy, absolute-form to the gateway's own name is brokered the same way.
  const viaProxy = await exchange(
    `POST http://gateway.agentvm.internal:3128/providers/anthropic/v1/messages HTTP/1.1\r\nhost: gateway.agentvm.internal:3128\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
  );
  assert.match(viaProxy.text, /^HTTP\/1\.1 200/);
  await setPolicy('none', []);
  const blocked = await exchange(`POST /providers/anthropic/v1/messages HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`);
  assert.match(blocked.text, /^HTTP\/1\.1 403/);
  const rows = await db.query<Record<string, unknown>>('SELECT * FROM egress_log WHERE vm_id = $1', [vmId]);
  assert.ok(!JSON.stringify(rows).includes('sk-ant-real-123'));
  assert.ok(rows.some((r) => r.reason === 'brokered ANTHROPIC_API_KEY'));
});

test('a VM whose gateway is detached gets nothing; a deleted VM is refused', async () => {
  await vmStore.egressOf(db, vmId);
  await db.query('UPDATE vms SET deleted_at = now() WHERE vm_id = $1', [vmId]);
  const r = await tunnel(`allowed.test:${upstreamPort}`);
  assert.equal(r.status, 403);
  await db.query('UPDATE vms SET deleted_at = NULL WHERE vm_id = $1', [vmId]);
  gateway.detach(vmId);
  await assert.rejects(exchange('GET / HTTP/1.1\r\n\r\n'), /ENOENT|ECONNREFUSED/);
  await gateway.attach(vmId, sock);
});

async function until(fn: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
