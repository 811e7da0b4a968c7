/**
 * E2B's API without a VM (decisions section 17): keys in E2B's format, the control plane's refusals
 * in E2B's shape (no key 401, a read key 403, no card nor credits 402 with nothing made, another
 * tenant's sandbox 404), and the sandbox plane's gate (unknown sandbox 502, wrong token 401, a
 * malformed Connect message invalid_argument with nothing reaching the guest). The whole path with a
 * real VM and E2B's SDK is test/e2b.test.ts.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { getRequestListener } from '@hono/node-server';
import { backends, createTestApp, insertVm, until, type TestApp } from './helpers.ts';
import * as metricsStore from '../src/store/metrics.ts';
import { FailureThrottle, RateLimiter } from '../src/throttle.ts';
import { serveE2b } from '../src/e2b/server.ts';
import * as store from '../src/e2b/store.ts';
import { fileSignature } from '../src/e2b/signature.ts';
import { sandboxRoute } from '../src/e2b/sandboxPlane.ts';
import { createLogger } from '../src/log.ts';
import type { GuestAccess } from '../src/domain/guestAccess.ts';
import { buildApp } from '../src/api/app.ts';
import { Sandbox } from 'e2b';

for (const backend of backends()) {
  describe(`E2B's API without a VM on ${backend.name}`, () => {
    let t: TestApp;
    let server: http.Server;
    let base: string;
    let e2b: { close(): void };
    /** Every guest call the sandbox plane makes (a malformed message must make none). */
    const guestCalls: string[] = [];
    const guest: GuestAccess = {
      openShell: async (vmId) => {
        guestCalls.push(`shell ${vmId}`);
        throw new Error('no guest in this test');
      },
      readFile: async (vmId) => {
        guestCalls.push(`read ${vmId}`);
        throw new Error('no guest in this test');
      },
      writeFile: async (vmId) => {
        guestCalls.push(`write ${vmId}`);
        throw new Error('no guest in this test');
      },
    };

    const call = async (method: string, path: string, o: { key?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { ...(o.key ? { 'x-api-key': o.key } : {}), ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}), ...(o.headers ?? {}) },
        body: o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    };
    const e2bKey = async (key: string, scope: 'read' | 'readwrite') => {
      const r = await t.request('POST', '/v1/api/keys', { key, body: { scope, format: 'e2b' } });
      assert.equal(r.status, 201, r.text);
      return r.body.key as string;
    };

    // The failed-authentication throttle, on a clock of its own (the test of it lets its minute pass after).
    let throttleNow = 0;
    const throttle = new FailureThrottle(() => throttleNow);
    // Requests per key, the API's and the control plane's together, on a clock of its own too.
    let limitNow = 0;
    const limiter = new RateLimiter(1, 10_000, () => limitNow);

    before(async () => {
      t = await createTestApp(backend);
      const quiet = createLogger('info', new Writable({ write: (_c, _e, cb) => cb() }));
      const app = buildApp({ services: t.services, log: quiet, adminToken: t.adminToken, rateLimit: { perSecond: 1, burst: 10_000 }, limiter, throttle });
      server = http.createServer(getRequestListener(app.fetch));
      e2b = serveE2b(server, t.services, guest, quiet, { throttle, limiter });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      t.services.previews.site = { domain: `localhost:${(server.address() as AddressInfo).port}`, scheme: 'http' };
    });
    after(async () => {
      e2b.close();
      await new Promise((r) => server.close(r));
      await t.close();
    });

    test('a key in E2B\'s format: e2b_ and 40 hex digits, good as a Bearer too; another format is 400', async () => {
      const tenant = await t.tenant();
      const key = await e2bKey(tenant.key, 'read');
      assert.match(key, /^e2b_[0-9a-f]{40}$/);
      assert.equal((await t.request('GET', '/v1/api/whoami', { key })).status, 200);
      assert.equal((await t.request('POST', '/v1/api/keys', { key: tenant.key, body: { format: 'x' } })).status, 400);
      assert.equal((await t.request('GET', '/v1/api/whoami', { key: `e2b_${'0'.repeat(40)}` })).status, 401);
    });

    test("the control plane answers in E2B's shape: 401, 403 read_only_key, 402 with nothing made, 404 for another tenant's", async () => {
      const rich = await t.tenant({ card: '4242' });
      const broke = await t.tenant();
      const richKey = await e2bKey(rich.key, 'readwrite');
      const readKey = await e2bKey(rich.key, 'read');
      const brokeKey = await e2bKey(broke.key, 'readwrite');
      const create = { templateID: 'base' };
      assert.deepEqual(await call('POST', '/e2b/v2/sandboxes', { body: create }), { status: 401, body: { code: 401, message: 'Invalid API key' } });
      const read = await call('POST', '/e2b/v2/sandboxes', { key: readKey, body: create });
      assert.equal(read.status, 403);
      assert.equal(read.body.code, 403);
      assert.match(read.body.message, /^read_only_key: /);
      const poor = await call('POST', '/e2b/v2/sandboxes', { key: brokeKey, body: create });
      assert.equal(poor.status, 402, JSON.stringify(poor.body));
      assert.equal(poor.body.code, 402);
      assert.match(poor.body.message, /^insufficient_credits: /);
      assert.deepEqual((await call('GET', '/e2b/v2/sandboxes', { key: brokeKey })).body, []);
      assert.equal((await t.services.vms.list(broke.tenantId)).length, 0, 'nothing was made');
      const bad = await call('POST', '/e2b/v2/sandboxes', { key: richKey, body: { templateID: 'base', timeout: -1 } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 400);

      const vmId = await insertVm(t.db, rich.tenantId);
      const id = vmId.toLowerCase().replace(/_/g, '-');
      const own = await call('GET', `/e2b/sandboxes/${id}`, { key: richKey });
      assert.equal(own.status, 200, JSON.stringify(own.body));
      assert.equal(own.body.sandboxID, id);
      assert.equal(own.body.state, 'running');
      const listed = await call('GET', '/e2b/v2/sandboxes', { key: readKey });
      assert.deepEqual(listed.body.map((s: { sandboxID: string }) => s.sandboxID), [id]);
      // E2B_DOMAIN alone: the SDK reaches the control plane at the root of `api.{domain}`.
      const viaHost = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const { port } = server.address() as AddressInfo;
        http
          .get({ host: '127.0.0.1', port, path: '/v2/sandboxes', headers: { host: `api.localhost:${port}`, 'x-api-key': readKey } }, (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (c) => (body += c)).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          })
          .on('error', reject);
      });
      assert.equal(viaHost.status, 200, viaHost.body);
      assert.deepEqual(JSON.parse(viaHost.body).map((s: { sandboxID: string }) => s.sandboxID), [id]);
      for (const [method, path] of [['GET', `/e2b/sandboxes/${id}`], ['DELETE', `/e2b/sandboxes/${id}`], ['POST', `/e2b/sandboxes/${id}/pause`]]) {
        const other = await call(method, path, { key: brokeKey });
        assert.equal(other.status, 404, `${method} ${path}`);
        assert.equal(other.body.code, 404);
      }
      assert.equal((await t.services.vms.get(rich.tenantId, vmId)).status, 'running', "another tenant's kill did nothing");
      assert.equal((await call('DELETE', `/e2b/sandboxes/${id}`, { key: readKey })).status, 403);

      // Metrics: the host's latest sample, at its own time, within `start`/`end` (Unix seconds) when given.
      assert.deepEqual((await call('GET', `/e2b/sandboxes/${id}/metrics`, { key: readKey })).body, [], 'not sampled yet');
      const sampledAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 3000);
      await metricsStore.saveSample(t.db, vmId, { cpu_percent: 42.5, memory_used_mib: 100, disk_used_bytes: 12345 }, sampledAt);
      const m = await call('GET', `/e2b/sandboxes/${id}/metrics`, { key: readKey });
      assert.equal(m.status, 200);
      assert.deepEqual(
        { ...m.body[0], memTotal: undefined, diskTotal: undefined, cpuCount: undefined },
        { timestamp: sampledAt.toISOString(), timestampUnix: sampledAt.getTime() / 1000, cpuUsedPct: 42.5, memUsed: 100 * 1024 * 1024, diskUsed: 12345, memTotal: undefined, diskTotal: undefined, cpuCount: undefined },
      );
      const unix = sampledAt.getTime() / 1000;
      assert.equal((await call('GET', `/e2b/sandboxes/${id}/metrics?start=${unix}&end=${unix}`, { key: readKey })).body.length, 1);
      assert.deepEqual((await call('GET', `/e2b/sandboxes/${id}/metrics?start=${unix + 1}`, { key: readKey })).body, [], 'sampled before the range');
      assert.deepEqual((await call('GET', `/e2b/sandboxes/${id}/metrics?end=${unix - 1}`, { key: readKey })).body, [], 'sampled after the range');
      assert.equal((await call('GET', `/e2b/sandboxes/${id}/metrics?start=yesterday`, { key: readKey })).status, 400);
    });

    test("updateNetwork: 'deny all, allow these hosts' is an allowlist, no rule the default, no internet none; rules by address 400 and nothing changed", async () => {
      const rich = await t.tenant({ card: '4242' });
      const stranger = await t.tenant({ card: '4242' });
      const key = await e2bKey(rich.key, 'readwrite');
      const vmId = await insertVm(t.db, rich.tenantId);
      const id = vmId.toLowerCase().replace(/_/g, '-');
      const put = (body: unknown, k = key) => call('PUT', `/e2b/sandboxes/${id}/network`, { key: k, body });
      const egress = async () => (await t.services.vms.get(rich.tenantId, vmId)).egress;

      assert.equal((await put({ denyOut: ['0.0.0.0/0'], allowOut: ['PyPI.org', '*.example.com', '@npm'] })).status, 204);
      assert.deepEqual(await egress(), { mode: 'allowlist', allow: ['*.example.com', '@npm', 'pypi.org'] });
      const info = await call('GET', `/e2b/sandboxes/${id}`, { key });
      assert.deepEqual(info.body.network, { allowOut: ['*.example.com', '@npm', 'pypi.org'], denyOut: ['0.0.0.0/0'], allowPublicTraffic: false });
      assert.equal(info.body.allowInternetAccess, true);

      for (const [body, words] of [
        [{ denyOut: ['0.0.0.0/0'], allowOut: ['1.1.1.1'] }, /allowOut: 1\.1\.1\.1: .*by name/],
        [{ denyOut: ['8.8.8.8/32'] }, /denyOut: 8\.8\.8\.8\/32: /],
        [{ allowOut: 'pypi.org' }, /lists of strings/],
        [{ egressProxy: { address: 'proxy.example.com:1080' } }, /egressProxy: not served/],
        [{ rules: { 'api.example.com': [{ transform: { headers: { a: 'b' } } }] } }, /rules: not served/],
        [{ denyOut: ['0.0.0.0/0'], allowOut: ['not a host'] }, /./],
      ] as const) {
        const refused = await put(body);
        assert.equal(refused.status, 400, JSON.stringify(refused.body));
        assert.match(refused.body.message, words);
      }
      assert.deepEqual((await egress()).allow, ['*.example.com', '@npm', 'pypi.org'], 'a refused update changed nothing');
      assert.equal((await put({}, await e2bKey(rich.key, 'read'))).status, 403);
      assert.equal((await put({}, await e2bKey(stranger.key, 'readwrite'))).status, 404);

      assert.equal((await put({ allow_internet_access: false })).status, 204);
      assert.deepEqual(await egress(), { mode: 'none', allow: [] });
      assert.equal((await call('GET', `/e2b/sandboxes/${id}`, { key })).body.allowInternetAccess, false);
      assert.equal((await put({})).status, 204, 'fields left out are cleared');
      assert.deepEqual((await egress()).mode, 'allowlist');
      assert.deepEqual(await egress(), (await import('../src/domain/vmPlacement.ts')).defaultEgress('echo'));
    });

    test('wrong keys on the control plane count against the address: after 30, 429 with Retry-After, even for a right key', async () => {
      const rich = await t.tenant({ card: '4242' });
      const key = await e2bKey(rich.key, 'readwrite');
      for (let i = 0; i < 30; i++) assert.equal((await call('GET', '/e2b/sandboxes', { key: `e2b_${'0'.repeat(39)}${i % 10}` })).status, 401, `wrong key ${i + 1}`);
      const refused = await fetch(`${base}/e2b/sandboxes`, { headers: { 'x-api-key': key } });
      assert.equal(refused.status, 429);
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.match((await refused.json()).message, /^rate_limited: /);
      throttleNow += 61_000;
      assert.equal((await call('GET', '/e2b/sandboxes', { key })).status, 200);
    });

    test("a key's rate is one for the API and the control plane: used up, both answer 429 with Retry-After; a body over 1 MiB is 413", async () => {
      const tenant = await t.tenant({ card: '4242' });
      const key = await e2bKey(tenant.key, 'readwrite');
      const keyId = (await t.services.keys.authenticate(key))!.keyId;
      assert.equal((await call('GET', '/e2b/sandboxes', { key })).status, 200);
      while (limiter.take(keyId) === 0);
      const refused = await fetch(`${base}/e2b/sandboxes`, { headers: { 'x-api-key': key } });
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.match((await refused.json()).message, /^rate_limited: too many requests for this key/);
      assert.equal((await fetch(`${base}/v1/api/whoami`, { headers: { authorization: `Bearer ${key}` } })).status, 429, "the API's own answer for the same key");
      const other = await e2bKey(tenant.key, 'readwrite');
      assert.equal((await call('GET', '/e2b/sandboxes', { key: other })).status, 200, 'another key has its own rate');
      limitNow += 1_000;
      assert.equal((await call('GET', '/e2b/sandboxes', { key })).status, 200, 'a second later the key has a request again');

      const big = JSON.stringify({ templateID: 'base', metadata: { pad: 'x'.repeat(1024 * 1024) } });
      const before = (await t.services.vms.list(tenant.tenantId)).length;
      for (const chunked of [false, true]) {
        const res = await fetch(`${base}/e2b/sandboxes`, {
          method: 'POST',
          headers: { 'x-api-key': other, 'content-type': 'application/json' },
          body: chunked ? new Blob([big]).stream() : big,
          ...(chunked ? { duplex: 'half' } : {}),
        } as RequestInit);
        assert.equal(res.status, 413, `chunked ${chunked}`);
        const body = await res.json();
        assert.equal(body.code, 413);
        assert.match(body.message, /^payload_too_large: /);
      }
      assert.equal((await t.services.vms.list(tenant.tenantId)).length, before, 'nothing was made');
    });

    test('a fork of count 2 where only one fits the limits is refused whole: 403 in E2B\'s shape, nothing made, the sandbox not paused', async () => {
      const rich = await t.tenant({ card: '4242' });
      const key = await e2bKey(rich.key, 'readwrite');
      const vmId = await insertVm(t.db, rich.tenantId);
      const now = new Date();
      await store.insert(t.db, { vm_id: vmId, tenant_id: rich.tenantId, template_id: 'base', access_token: 'ea_fork', traffic_token: null, metadata: {}, env_vars: {}, auto_pause: false, auto_pause_memory: true, end_at: now, created_at: now });
      assert.equal((await t.admin('PUT', `/v1/admin/tenants/${rich.tenantId}/limits`, { vms: 2 })).status, 200);
      const id = vmId.toLowerCase().replace(/_/g, '-');
      const refused = await call('POST', `/e2b/sandboxes/${id}/fork`, { key, body: { count: 2 } });
      assert.equal(refused.status, 403, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 403);
      assert.match(refused.body.message, /^quota_exceeded: limit vms is 2 and the current count is 1\b/);
      assert.equal((await t.services.vms.list(rich.tenantId)).length, 1, 'no fork was made');
      assert.deepEqual(await t.db.query('SELECT snapshot_id FROM snapshots WHERE vm_id = $1', [vmId]), [], 'no snapshot was taken');
      assert.equal((await t.services.vms.get(rich.tenantId, vmId)).desired_state, 'running');
    });

    test("Sandbox.list's filters as E2B's SDK sends them: metadata (each key and value encoded), template, startedAfter, order", async () => {
      const tenant = await t.tenant({ card: '4242' });
      const key = await e2bKey(tenant.key, 'read');
      const at = (ms: number) => new Date(Date.parse('2026-01-01T00:00:00Z') + ms);
      const sandboxes: Record<string, string> = {};
      for (const [name, template, metadata, ms] of [['mail', 'base', { user: 'a@b.com', 'a key': 'x&y' }, 0], ['other', 'python', { user: 'c@d.com' }, 60_000], ['late', 'python', { user: 'a@b.com' }, 120_000]] as const) {
        const vmId = await insertVm(t.db, tenant.tenantId);
        sandboxes[name] = vmId.toLowerCase().replace(/_/g, '-');
        await store.insert(t.db, { vm_id: vmId, tenant_id: tenant.tenantId, template_id: template, access_token: `ea_${name}`, traffic_token: null, metadata, env_vars: {}, auto_pause: false, auto_pause_memory: true, end_at: at(ms + 3_600_000), created_at: at(ms) });
      }
      const list = async (query: Record<string, unknown>, order?: 'asc' | 'desc') =>
        (await Sandbox.list({ apiKey: key, apiUrl: `${base}/e2b`, query, ...(order ? { order } : {}) } as Parameters<typeof Sandbox.list>[0]).nextItems()).map((s) => Object.keys(sandboxes).find((n) => sandboxes[n] === s.sandboxId));
      assert.deepEqual(await list({}), ['late', 'other', 'mail'], 'newest first');
      assert.deepEqual(await list({}, 'asc'), ['mail', 'other', 'late']);
      assert.deepEqual(await list({ metadata: { user: 'a@b.com' } }), ['late', 'mail']);
      assert.deepEqual(await list({ metadata: { 'a key': 'x&y' } }), ['mail']);
      assert.deepEqual(await list({ template: 'python' }), ['late', 'other']);
      assert.deepEqual(await list({ startedAfter: at(60_000) }), ['late', 'other']);
      assert.equal((await call('GET', '/e2b/v2/sandboxes?order=sideways', { key })).status, 400);
      assert.equal((await call('GET', '/e2b/v2/sandboxes?startedAfter=yesterday', { key })).status, 400);
    });

    test("a signed /files URL names its sandbox by the signature on the server's own host only: on a preview's host it is the app's", () => {
      const req = (host: string) => ({ url: '/files?path=a&signature=v1_x', headers: { host } }) as unknown as http.IncomingMessage;
      assert.deepEqual(sandboxRoute(req('127.0.0.1:8080'), 'localhost:8080'), { sandboxId: '', port: 49983, path: '/files?path=a&signature=v1_x' });
      assert.equal(sandboxRoute(req('3000-vm-abc.localhost:8080'), 'localhost:8080'), null, "the app's own /files");
      assert.equal(sandboxRoute(req('49983-vm-abc.localhost:8080'), 'localhost:8080')?.sandboxId, 'vm-abc', "the sandbox's envd host names it");
    });

    test('a sandbox woken after its timeout (a request to its preview) gets a new end, not a pause again; one running past its end pauses', async () => {
      const tenant = await t.tenant({ card: '4242' });
      const now = t.services.clock.now().getTime();
      const [woken, late] = [await insertVm(t.db, tenant.tenantId), await insertVm(t.db, tenant.tenantId)];
      for (const vmId of [woken, late]) {
        const at = new Date(now - 60_000);
        await store.insert(t.db, { vm_id: vmId, tenant_id: tenant.tenantId, template_id: 'base', access_token: `ea_${vmId}`, traffic_token: null, metadata: {}, env_vars: {}, auto_pause: true, auto_pause_memory: true, end_at: at, created_at: at });
      }
      await t.db.query('UPDATE vms SET running_since = $2 WHERE vm_id = $1', [woken, new Date(now - 1000)]);
      await t.db.query('UPDATE vms SET running_since = $2 WHERE vm_id = $1', [late, new Date(now - 120_000)]);
      await until('the sweep paused the one past its end', async () => (await t.services.vms.get(tenant.tenantId, late)).desired_state === 'suspended', 30_000);
      assert.equal((await t.services.vms.get(tenant.tenantId, woken)).desired_state, 'running');
      assert.equal((await store.get(t.db, woken))!.end_at.getTime(), now - 1000 + 300_000, "E2B's default timeout from its wake");
    });

    test('the sandbox plane: unknown sandbox 502, wrong token 401, a malformed Connect message invalid_argument and no guest call', async () => {
      const tenant = await t.tenant({ card: '4242' });
      const vmId = await insertVm(t.db, tenant.tenantId);
      const id = vmId.toLowerCase().replace(/_/g, '-');
      const now = new Date();
      await store.insert(t.db, { vm_id: vmId, tenant_id: tenant.tenantId, template_id: 'base', access_token: 'ea_right', traffic_token: null, metadata: {}, env_vars: {}, auto_pause: false, auto_pause_memory: true, end_at: now, created_at: now });
      const at = (sandbox: string, token?: string) => ({ 'e2b-sandbox-id': sandbox, 'e2b-sandbox-port': '49983', ...(token ? { 'x-access-token': token } : {}) });
      const unknown = await call('POST', '/e2b/sandbox/process.Process/List', { body: {}, headers: at('vm-nosuchsandbox', 'ea_right') });
      assert.equal(unknown.status, 502, "E2B's proxy's answer for a sandbox it cannot reach");
      assert.equal(unknown.body.code, 502);
      assert.equal((await call('POST', '/e2b/sandbox/process.Process/List', { body: {}, headers: at(id, 'ea_wrong') })).status, 401);
      assert.equal((await call('POST', '/e2b/sandbox/process.Process/List', { body: {}, headers: at(id) })).status, 401);
      assert.equal((await call('GET', '/e2b/sandbox/health', { headers: at(id, 'ea_right') })).status, 204);
      // By Host, as E2B_DOMAIN makes the SDK send it.
      const port = (server.address() as AddressInfo).port;
      const byHost = await new Promise<number>((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path: '/health', headers: { host: `49983-${id}.localhost:${port}`, 'x-access-token': 'ea_right' } }, (res) => (res.resume(), resolve(res.statusCode!))).on('error', reject);
      });
      assert.equal(byHost, 204);
      const listed = await call('POST', '/e2b/sandbox/process.Process/List', { body: {}, headers: at(id, 'ea_right') });
      assert.deepEqual(listed, { status: 200, body: {} }, 'no process (proto3 JSON leaves an empty list out)');
      for (const [path, body] of [
        ['/e2b/sandbox/process.Process/SendInput', { process: { pid: 'not a number' }, input: { stdin: 'eA==' } }],
        ['/e2b/sandbox/filesystem.Filesystem/Move', { source: '/tmp/a', destination: { not: 'a path' } }],
        ['/e2b/sandbox/filesystem.Filesystem/MakeDir', '{"path": '],
      ] as const) {
        const r = await call('POST', path, { body, headers: at(id, 'ea_right') });
        assert.equal(r.status, 400, `${path}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.code, 'invalid_argument');
      }
      assert.deepEqual(guestCalls, [], 'nothing reached the guest');
      const missing = await call('POST', '/e2b/sandbox/process.Process/SendInput', { body: { process: { pid: 4242 }, input: { stdin: 'eA==' } }, headers: at(id, 'ea_right') });
      assert.equal(missing.status, 404);
      assert.equal(missing.body.code, 'not_found');
      const huge = await call('POST', '/e2b/sandbox/process.Process/SendInput', { body: { process: { pid: 4242 }, input: { stdin: Buffer.alloc(1024 * 1024).toString('base64') } }, headers: at(id, 'ea_right') });
      assert.equal(huge.status, 429, `a message over 1 MiB: Connect's resource_exhausted (${JSON.stringify(huge.body)})`);
      assert.equal(huge.body.code, 'resource_exhausted');
      assert.deepEqual(guestCalls, [], 'nothing reached the guest');

      // Wrong tokens count against the address with the API's wrong keys: 29 more (one above), then even the right token is 429.
      for (let i = 0; i < 28; i++) assert.equal((await call('GET', '/e2b/sandbox/health', { headers: at(id, `ea_wrong${i}`) })).status, 401);
      assert.equal((await call('GET', '/e2b/sandbox/health', { headers: at(id, 'ea_right') })).status, 204, 'under the limit yet');
      assert.equal((await call('GET', '/e2b/sandbox/health', { headers: at(id, 'ea_wrong') })).status, 401);
      const refused = await fetch(`${base}/e2b/sandbox/health`, { headers: at(id, 'ea_right') });
      assert.equal(refused.status, 429);
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      assert.match((await refused.json()).message, /^rate_limited: /);
      throttleNow += 61_000;
      assert.equal((await call('GET', '/e2b/sandbox/health', { headers: at(id, 'ea_right') })).status, 204);

      // A signed URL's user is the one it was signed for: a Basic header naming root changes nothing
      // (a relative path is then the user's, on the persist disk: a file read, not a root process).
      guestCalls.length = 0;
      const signature = fileSignature('notes.txt', 'read', '', 'ea_right', null);
      const signed = await fetch(`${base}/e2b/sandbox/files?path=notes.txt&signature=${encodeURIComponent(signature)}`, { headers: { 'e2b-sandbox-id': id, authorization: `Basic ${Buffer.from('root:').toString('base64')}` } });
      assert.notEqual(signed.status, 401, await signed.text());
      assert.deepEqual(guestCalls, [], "no process of root's (`cat /root/notes.txt`): the user's file, read from the persist disk");
    });
  });
}
