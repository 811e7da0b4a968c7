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
import { DenyList } from '../src/net/denyList.ts';
import { canonicalIp, embeddedV4 } from '../src/net/ipAddress.ts';
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
  // A preset is one entry, expanded when the gateway decides, and named with the host in the log's reason.
  const presets = { mode: 'allowlist' as const, allow: ['@github', '@npm'] };
  assert.deepEqual(decideName(presets, 'codeload.github.com'), { allowed: true, reason: 'allowlist @github (codeload.github.com)' });
  assert.equal(decideName(presets, 'registry.npmjs.org').allowed, true);
  assert.equal(decideName(presets, 'gist.github.com').allowed, false);
  assert.equal(decideName({ mode: 'allowlist', allow: ['constructor'] }, 'x.example').allowed, false);
  assert.equal(policyProblem({ mode: 'allowlist', allow: ['@debian', '@pypi', '@crates', '@go'] }), null);
  assert.match(policyProblem({ mode: 'allowlist', allow: ['@nope'] })?.message ?? '', /not a preset \(@debian, @npm/);
});

test('the deny list holds every range of the policy, IPv4 inside IPv6 included, and the host itself', () => {
  const deny = new DenyList();
  for (const addr of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '100.64.0.1', '169.254.169.254', '0.0.0.0', '224.0.0.1', '255.255.255.255', '::1', 'fc00::1', 'fd12::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1', '2002:a00:1::', '::']) {
    assert.ok(deny.reason(addr), `${addr} must be denied`);
  }
  for (const addr of ['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '172.32.0.1', '100.128.0.1']) assert.equal(deny.reason(addr), null, addr);
  for (const own of Object.values(os.networkInterfaces()).flatMap((l) => l ?? [])) assert.ok(deny.reason(own.address), `own ${own.address}`);
  assert.equal(embeddedV4('::ffff:10.0.0.1'), '10.0.0.1');
  assert.equal(canonicalIp('0:0:0:0:0:ffff:a9fe:a9fe'), '169.254.169.254');
  assert.equal(canonicalIp('[2001:0DB8:0:0:1:0:0:1]'), '2001:db8::1:0:0:1');
  assert.equal(canonicalIp('fe80::1%eth0'), null, 'a zone id is not a literal the gateway reaches');
  assert.equal(canonicalIp('127.1'), null, 'not a literal: a name, resolved and then judged by its address');
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
function exchange(request: string, ms = 5000, at = sock): Promise<{ text: string; elapsed: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const s = net.connect(at);
    let text = '';
    s.on('data', (c) => (text += c.toString()));
    s.on('end', () => resolve({ text, elapsed: Date.now() - t0 }));
    s.on('error', reject);
    s.setTimeout(ms, () => (s.destroy(), resolve({ text, elapsed: Date.now() - t0 })));
    s.write(request);
  });
}

/** A CONNECT tunnel, then one HTTP request inside it. */
async function tunnel(hostPort: string, at = sock): Promise<{ status: number; body: string; elapsed: number }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const s = net.connect(at);
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
  // The log says why it was allowed: the allowlist's entry.
  assert.equal(allowed.reason, 'allowlist allowed.test');
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
  // The log counts the request line and headers that went up, and the whole answer that came back.
  await until(async () => (await egressStore.listLog(db, vmId, 1)).data[0].bytes_in > 0);
  const row = (await egressStore.listLog(db, vmId, 1)).data[0];
  assert.ok(row.bytes_out >= Buffer.byteLength(`GET /plain HTTP/1.1\r\nhost: allowed.test:${upstreamPort}\r\n\r\n`), `bytes_out ${row.bytes_out}`);
  assert.ok(row.bytes_in > Buffer.byteLength(`upstream GET /plain`), `bytes_in ${row.bytes_in}`);
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

// ---- attacks a security review of the gateway found; each was answered wrongly before its fix ----

/** A server that must never hear from the gateway: what it receives is what leaked. */
async function listening(handler: http.RequestListener): Promise<{ server: http.Server; port: number }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as net.AddressInfo).port };
}

/** A second gateway on the same VM, with other settings, on a socket of its own. */
async function otherGateway(name: string, deps: Partial<ConstructorParameters<typeof EgressGateway>[0]>): Promise<{ gw: EgressGateway; at: string }> {
  const gw = new EgressGateway({ db, credentials, providerUrls: { anthropic: `http://anthropic.test:${providerPort}/base`, openai: 'http://openai.test:1', google: 'http://google.test:1' }, pins: parsePins('allowed.test=127.0.0.1,anthropic.test=127.0.0.1'), log, ...deps });
  const at = path.join(dir, `${name}.sock`);
  await gw.attach(vmId, at);
  return { gw, at };
}

/** A CONNECT that stays open once established: its socket, or the status it was refused with. */
function openTunnel(hostPort: string, at: string): Promise<{ status: number; socket: net.Socket; text: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(at);
    let buf = '';
    s.on('data', (c) => {
      buf += c.toString();
      if (buf.includes('\r\n\r\n')) resolve({ status: Number(buf.slice(9, 12)), socket: s, text: buf });
    });
    s.on('error', reject);
    s.write(`CONNECT ${hostPort} HTTP/1.1\r\nhost: ${hostPort}\r\n\r\n`);
  });
}

test('attack: a brokered path cannot carry the real key to another host (//host, backslash, dot segments, encoded forms)', async () => {
  const heard: string[] = [];
  const attacker = await listening((req, res) => (heard.push(`${req.headers.host} ${req.url} ${req.headers['x-api-key']}`), res.end('got it')));
  const { gw, at } = await otherGateway('attack-path', { pins: parsePins(`allowed.test=127.0.0.1,anthropic.test=127.0.0.1,attacker.test=127.0.0.1`) });
  try {
    await setPolicy('public', []);
    await credentials.apply(vmId, { ANTHROPIC_API_KEY: 'sk-ant-must-not-leak' }, async () => []);
    const seenBefore = seenByProvider.length;
    const target = `attacker.test:${attacker.port}`;
    for (const rest of [`//${target}/x`, `/%2f%2f${target}/x`, `/%2F${target}/x`, `/v1/../../x`, `/v1/%2e%2e/%2e%2e/x`, `/v1/%2E%2E/x`, `/v1/./x`, `/v1/%5c${target}/x`]) {
      const r = await exchange(`POST /providers/anthropic${rest} HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`, 5000, at);
      assert.match(r.text, /^HTTP\/1\.1 400/, rest);
      assert.match(r.text, /may not hold/, rest);
    }
    const viaProxy = await exchange(
      `POST http://gateway.agentvm.internal:3128/providers/anthropic//${target}/x HTTP/1.1\r\nhost: gateway.agentvm.internal:3128\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`,
      5000,
      at,
    );
    assert.match(viaProxy.text, /^HTTP\/1\.1 400/);
    assert.deepEqual(heard, [], 'the attacker heard nothing');
    assert.equal(seenByProvider.length, seenBefore, 'nothing went to the provider either');
    // The same request on a path that stays under the provider's prefix goes through.
    const ok = await exchange(`POST /providers/anthropic/v1/messages HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`, 5000, at);
    assert.match(ok.text, /^HTTP\/1\.1 200/);
    assert.equal(seenByProvider.at(-1)!.path, '/base/v1/messages');
  } finally {
    await gw.close();
    attacker.server.close();
  }
});

test('attack: brokered requests carry only the methods the providers use (GET, POST, DELETE)', async () => {
  await setPolicy('allowlist', ['api.anthropic.com']);
  const seenBefore = seenByProvider.length;
  for (const method of ['TRACE', 'PUT', 'PATCH', 'OPTIONS']) {
    const r = await exchange(`${method} /providers/anthropic/v1/messages HTTP/1.1\r\nhost: gw\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
    assert.match(r.text, /^HTTP\/1\.1 405/, method);
  }
  assert.equal(seenByProvider.length, seenBefore);
  const get = await exchange(`GET /providers/anthropic/v1/models HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n`);
  assert.match(get.text, /^HTTP\/1\.1 200/);
});

test('attack: in public mode no spelling of a loopback, metadata or link-local address gets through', async () => {
  await setPolicy('public', []);
  const heard: string[] = [];
  const inside = await listening((req, res) => (heard.push(req.url!), res.end('inside')));
  try {
    const p = inside.port;
    const spellings = [
      `[0:0:0:0:0:ffff:169.254.169.254]:80`,
      `[0::ffff:127.0.0.1]:${p}`,
      `[::ffff:0:7f00:1]:${p}`,
      `[::7f00:1]:${p}`,
      `[::127.0.0.1]:${p}`,
      `[0:0:0:0:0:ffff:7f00:0001]:${p}`,
      `[64:ff9b::7f00:1]:${p}`,
      `[fe80::1%25lo]:${p}`,
      `[fe80::1%lo]:${p}`,
    ];
    for (const target of spellings) {
      const r = await tunnel(target);
      assert.equal(r.status, 403, target);
      const host = target.replace(/:\d+$/, '');
      const plain = await exchange(`GET http://${host}:${p}/plain HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`);
      assert.match(plain.text, /^HTTP\/1\.1 (403|400)/, `absolute-form ${target}`);
    }
    assert.deepEqual(heard, [], 'nothing reached the host');
    const log = (await egressStore.listLog(db, vmId, spellings.length * 2)).data;
    assert.ok(log.some((e) => e.host === '169.254.169.254' && /link-local/.test(e.reason)), 'the log names the address in its canonical form');
  } finally {
    inside.server.close();
  }
});

test("attack: the operator's provider URL, an IP literal, is reached only through the brokered path", async () => {
  const { gw, at } = await otherGateway('ip-provider', {
    providerUrls: { anthropic: `http://127.0.0.1:${providerPort}/base`, openai: 'http://openai.test:1', google: 'http://google.test:1' },
    pins: new Map(),
  });
  try {
    await credentials.apply(vmId, { ANTHROPIC_API_KEY: 'sk-ant-ip' }, async () => []);
    await setPolicy('allowlist', ['api.anthropic.com']);
    const ok = await exchange(`POST /providers/anthropic/v1/messages HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`, 5000, at);
    assert.match(ok.text, /^HTTP\/1\.1 200/);
    assert.equal(seenByProvider.at(-1)!.headers['x-api-key'], 'sk-ant-ip');
    const row = (await egressStore.listLog(db, vmId, 1)).data[0];
    assert.equal(row.host, 'api.anthropic.com', 'logged by the name the policy uses');
    await setPolicy('public', []);
    assert.equal((await tunnel(`127.0.0.1:${providerPort}`, at)).status, 403);
    await setPolicy('allowlist', []);
    assert.match((await exchange(`POST /providers/anthropic/v1/messages HTTP/1.1\r\nhost: gw\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`, 5000, at)).text, /^HTTP\/1\.1 403/);
  } finally {
    await gw.close();
  }
});

test('attack: a VM cannot hold more than its connections at the gateway, open more than its rate, or keep an idle one', async () => {
  await setPolicy('allowlist', ['allowed.test']);
  let now = 1_000_000;
  const { gw, at } = await otherGateway('limits', { limits: { maxOpen: 2, newPerSecond: 100, idleMs: 60_000 } });
  const { gw: rateGw, at: rateAt } = await otherGateway('rate', { limits: { newPerSecond: 3 }, now: () => now });
  const { gw: idleGw, at: idleAt } = await otherGateway('idle', { limits: { idleMs: 200 } });
  try {
    const a = await openTunnel(`allowed.test:${upstreamPort}`, at);
    const b = await openTunnel(`allowed.test:${upstreamPort}`, at);
    assert.deepEqual([a.status, b.status], [200, 200]);
    const third = await openTunnel(`allowed.test:${upstreamPort}`, at);
    assert.equal(third.status, 429);
    assert.match(third.text, /2 connections open/);
    a.socket.destroy();
    // Once the gateway has seen the close, a new one is admitted.
    let c = third;
    await until(async () => {
      if (c.status !== 200) c = await openTunnel(`allowed.test:${upstreamPort}`, at);
      return c.status === 200;
    });
    b.socket.destroy();
    c.socket.destroy();
    const burst = [];
    for (let i = 0; i < 4; i++) burst.push(await exchange(`GET http://allowed.test:${upstreamPort}/b HTTP/1.1\r\nhost: allowed.test\r\nconnection: close\r\n\r\n`, 5000, rateAt));
    assert.deepEqual(burst.map((r) => r.text.slice(9, 12)), ['200', '200', '200', '429'], 'three new connections a second, then 429');
    now += 1000;
    assert.match((await exchange(`GET http://allowed.test:${upstreamPort}/b HTTP/1.1\r\nhost: allowed.test\r\nconnection: close\r\n\r\n`, 5000, rateAt)).text, /^HTTP\/1\.1 200/);
    const idle = await openTunnel(`allowed.test:${upstreamPort}`, idleAt);
    assert.equal(idle.status, 200);
    await new Promise((r) => idle.socket.once('close', r));
  } finally {
    await gw.close();
    await rateGw.close();
    await idleGw.close();
  }
});
