/**
 * Per-tenant limits and quotas (decisions section 14) against the database, through the API built in
 * process: each limit refuses the create that would go over it with 403 quota_exceeded, and nothing is
 * charged or changed; the operator's override raises and lowers a limit; GET /v1/api/limits shows
 * usage. No QEMU: a registered host row is enough for creates (vm-real.test.ts boots real VMs).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocket } from 'ws';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { backends, createTestApp, insertVm, killQemusUnder, until, type TestApp, type TestResponse } from './helpers.ts';
import { buildApp } from '../src/api/app.ts';
import { createLogger } from '../src/log.ts';
import { newId } from '../src/domain/ids.ts';
import { DEFAULT_LIMITS, LIMIT_NAMES, type StreamLease } from '../src/domain/limits.ts';
import { eventStreamResponse } from '../src/api/eventStream.ts';
import type { Context } from 'hono';
import * as runStore from '../src/store/runs.ts';
import * as vmStore from '../src/store/vms.ts';

const BIN = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../bin/agentvm.js');
const quiet = () => createLogger('info', new Writable({ write: (_c, _e, cb) => cb() }));

for (const backend of backends()) {
  describe(`limits and quotas on ${backend.name}`, () => {
    let t: TestApp;
    const host = { host_id: 'host_limits', name: 'limits', accel: 'tcg', image_id: 'img_test', vcpus_total: 1000, memory_mib_total: 1024 * 1024, disk_gib_total: 100_000 };
    before(async () => {
      t = await createTestApp(backend, { capture: () => undefined });
      await t.services.hosts.register(host);
    });
    after(() => t.close());

    const ledger = (tenantId: string) => t.db.query('SELECT * FROM ledger WHERE tenant_id = $1 ORDER BY entry_id', [tenantId]);
    const count = async (sql: string, tenantId: string) => (await t.db.query<{ n: number }>(sql, [tenantId]))[0].n;
    const vmCount = (tenantId: string) => count('SELECT count(*)::int AS n FROM vms WHERE tenant_id = $1 AND deleted_at IS NULL', tenantId);
    const setLimits = async (tenantId: string, limits: Record<string, number | null>) => {
      const res = await t.admin('PUT', `/v1/admin/tenants/${tenantId}/limits`, limits);
      assert.equal(res.status, 200, res.text);
      return res.body;
    };
    const usage = async (key: string) => (await t.request('GET', '/v1/api/limits', { key })).body.usage;
    const createVm = (key: string, body: object = {}) => t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo', ...body } });

    /** A 403 quota_exceeded naming the limit, its value and the current count. */
    function refused(res: TestResponse, name: string, limit: number, current: number): void {
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error, 'quota_exceeded');
      assert.match(res.body.message, new RegExp(`^limit ${name} is ${limit} and the current count is ${current}\\b`));
      assert.ok(res.body.hint);
    }

    /** Runs a refused request and checks that it changed neither the ledger nor the counted rows. */
    async function refusedUnchanged(tenantId: string, request: () => Promise<TestResponse>, name: string, limit: number, current: number): Promise<void> {
      const snapshot = async () => ({
        ledger: await ledger(tenantId),
        vms: await t.db.query('SELECT vm_id, status, desired_state FROM vms WHERE tenant_id = $1 ORDER BY vm_id', [tenantId]),
        templates: await t.db.query('SELECT template_id FROM templates WHERE tenant_id = $1 ORDER BY template_id', [tenantId]),
        webhooks: await count('SELECT count(*)::int AS n FROM webhooks WHERE tenant_id = $1', tenantId),
        keys: await count('SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = $1', tenantId),
        forks: await t.db.query('SELECT template_id, forks FROM templates ORDER BY template_id'),
        events: await count('SELECT count(*)::int AS n FROM events WHERE tenant_id = $1', tenantId),
      });
      const before = await snapshot();
      refused(await request(), name, limit, current);
      assert.deepEqual(await snapshot(), before);
    }

    test('GET /v1/api/limits: the defaults and usage by the same names; the operator raises, lowers and resets one', async () => {
      const a = await t.tenant({ card: '4242' });
      const view = await t.request('GET', '/v1/api/limits', { key: a.key });
      assert.equal(view.status, 200);
      assert.deepEqual(view.body.limits, DEFAULT_LIMITS);
      assert.deepEqual(Object.keys(view.body.usage).sort(), [...LIMIT_NAMES].sort());
      assert.deepEqual(view.body.usage, { ...Object.fromEntries(LIMIT_NAMES.map((n) => [n, 0])), api_keys: 1 });

      assert.equal((await createVm(a.key, { plan: 'pro' })).status, 201);
      assert.deepEqual(await usage(a.key), { ...view.body.usage, vms: 1, running_vms: 1, vcpus: 2, memory_mib: 4096, disk_gib: 50 });

      const raised = await setLimits(a.tenantId, { vms: 500, webhooks: 3 });
      assert.deepEqual(raised.limits, { ...DEFAULT_LIMITS, vms: 500, webhooks: 3 });
      assert.equal(raised.usage.vms, 1);
      const lowered = await setLimits(a.tenantId, { vms: 0 });
      assert.deepEqual(lowered.limits, { ...DEFAULT_LIMITS, vms: 0, webhooks: 3 }, 'a partial change keeps the others');
      const reset = await setLimits(a.tenantId, { vms: null });
      assert.deepEqual(reset.limits, { ...DEFAULT_LIMITS, webhooks: 3 });
      // Another tenant keeps the defaults.
      const b = await t.tenant();
      assert.deepEqual((await t.request('GET', '/v1/api/limits', { key: b.key })).body.limits, DEFAULT_LIMITS);
    });

    test('the admin change: bad values are a 400 naming the field, an unknown tenant 404, a customer key 401; nothing changes', async () => {
      const a = await t.tenant();
      for (const body of [{ vms: -1 }, { vms: 1.5 }, { vms: '3' }, { cpus: 3 }, { vms: 2_000_000_000 }]) {
        const res = await t.admin('PUT', `/v1/admin/tenants/${a.tenantId}/limits`, body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'invalid_request');
        assert.match(res.body.message, /^(vms|cpus)/);
      }
      const unknown = await t.admin('PUT', '/v1/admin/tenants/ten_doesnotexist/limits', { vms: 3 });
      assert.equal(unknown.status, 404);
      assert.equal((await t.request('PUT', `/v1/admin/tenants/${a.tenantId}/limits`, { key: a.key, body: { vms: 1000 } })).status, 401);
      assert.deepEqual((await t.request('GET', '/v1/api/limits', { key: a.key })).body.limits, DEFAULT_LIMITS);
      assert.equal(await count('SELECT count(*)::int AS n FROM tenant_limits WHERE tenant_id = $1', a.tenantId), 0);
    });

    test('vms: a create (a burst of several too) that would go over is refused whole and charges nothing', async () => {
      const a = await t.tenant({ card: '4242', credits: 10_000 });
      await setLimits(a.tenantId, { vms: 3 });
      assert.equal((await createVm(a.key)).status, 201);
      await refusedUnchanged(a.tenantId, () => createVm(a.key, { tier: 'spot', count: 3 }), 'vms', 3, 1);
      assert.equal((await createVm(a.key, { tier: 'spot', count: 2 })).status, 201);
      await refusedUnchanged(a.tenantId, () => createVm(a.key, { plan: 'starter' }), 'vms', 3, 3);
      // A stopped VM still counts; a destroyed one does not.
      const [first] = (await t.request('GET', '/v1/api/vms', { key: a.key })).body.data;
      assert.equal((await t.request('POST', `/v1/api/vms/${first.vm_id}/stop`, { key: a.key })).status, 200);
      await refusedUnchanged(a.tenantId, () => createVm(a.key), 'vms', 3, 3);
      assert.equal((await t.request('DELETE', `/v1/api/vms/${first.vm_id}`, { key: a.key })).status, 200);
      assert.equal((await createVm(a.key)).status, 201);
      assert.equal(await vmCount(a.tenantId), 3);
      // The operator raises it: the same create goes through.
      await setLimits(a.tenantId, { vms: 4 });
      assert.equal((await createVm(a.key)).status, 201);
    });

    test('creates at once: no more go through than the limit has room for (the quota lock orders them)', async () => {
      const a = await t.tenant({ card: '4242' });
      await setLimits(a.tenantId, { vms: 2 });
      const answers = await Promise.all(Array.from({ length: 6 }, () => createVm(a.key)));
      assert.deepEqual(answers.map((r) => r.status).sort(), [201, 201, 403, 403, 403, 403]);
      assert.equal(await vmCount(a.tenantId), 2);
      assert.equal((await ledger(a.tenantId)).length, 2);
      await setLimits(a.tenantId, { webhooks: 3 });
      const hooks = await Promise.all(Array.from({ length: 6 }, (_, i) => t.request('POST', '/v1/api/webhooks', { key: a.key, body: { url: `https://hooks.example.com/${i}`, events: ['vm.stopped'] } })));
      assert.equal(hooks.filter((r) => r.status === 201).length, 3);
      assert.equal(await count('SELECT count(*)::int AS n FROM webhooks WHERE tenant_id = $1', a.tenantId), 3);
    });

    test('running_vms: a create and a start that would go over are refused; a restart of a running VM is not, under a lowered limit either', async () => {
      const a = await t.tenant({ card: '4242' });
      await setLimits(a.tenantId, { running_vms: 1 });
      const first = (await createVm(a.key)).body.vm_id;
      await refusedUnchanged(a.tenantId, () => createVm(a.key), 'running_vms', 1, 1);
      assert.equal((await t.request('POST', `/v1/api/vms/${first}/stop`, { key: a.key })).status, 200);
      const second = (await createVm(a.key)).body.vm_id;
      assert.ok(second);
      await refusedUnchanged(a.tenantId, () => t.request('POST', `/v1/api/vms/${first}/start`, { key: a.key }), 'running_vms', 1, 1);
      assert.equal((await t.request('GET', `/v1/api/vms/${first}`, { key: a.key })).body.status, 'stopping');
      assert.equal((await t.request('POST', `/v1/api/vms/${second}/restart`, { key: a.key })).status, 200);
      await setLimits(a.tenantId, { running_vms: 0 });
      assert.equal((await t.request('POST', `/v1/api/vms/${second}/reprovision`, { key: a.key })).status, 200);
      await refusedUnchanged(a.tenantId, () => t.request('POST', `/v1/api/vms/${first}/restart`, { key: a.key }), 'running_vms', 0, 1);
      await setLimits(a.tenantId, { running_vms: 2 });
      assert.equal((await t.request('POST', `/v1/api/vms/${first}/start`, { key: a.key })).status, 200);
      assert.equal((await usage(a.key)).running_vms, 2);
    });

    test('vcpus and memory_mib count running and suspended VMs, not stopped ones', async () => {
      const a = await t.tenant({ card: '4242' });
      await setLimits(a.tenantId, { vcpus: 3, memory_mib: 5000 });
      const pro = (await createVm(a.key, { plan: 'pro' })).body.vm_id;
      await refusedUnchanged(a.tenantId, () => createVm(a.key, { plan: 'starter' }), 'memory_mib', 5000, 4096);
      await refusedUnchanged(a.tenantId, () => createVm(a.key, { plan: 'pro' }), 'vcpus', 3, 2);
      // Suspended: still counted.
      await t.db.query(`UPDATE vms SET status = 'running' WHERE vm_id = $1`, [pro]);
      assert.equal((await t.request('POST', `/v1/api/vms/${pro}/suspend`, { key: a.key })).status, 200);
      assert.deepEqual(await usage(a.key).then((u) => [u.running_vms, u.vcpus, u.memory_mib]), [0, 2, 4096]);
      await refusedUnchanged(a.tenantId, () => createVm(a.key, { plan: 'starter' }), 'memory_mib', 5000, 4096);
      // Stopped: not counted, and its start counts again.
      assert.equal((await t.request('POST', `/v1/api/vms/${pro}/stop`, { key: a.key })).status, 200);
      assert.equal((await createVm(a.key, { plan: 'starter' })).status, 201);
      await refusedUnchanged(a.tenantId, () => t.request('POST', `/v1/api/vms/${pro}/start`, { key: a.key }), 'memory_mib', 5000, 1024);
    });

    test('disk_gib counts persist disks of every VM not deleted and templates; templates is a count of captures', async () => {
      const a = await t.tenant({ card: '4242' });
      await setLimits(a.tenantId, { disk_gib: 60, templates: 1 });
      assert.equal((await createVm(a.key, { plan: 'pro' })).status, 201);
      const starter = (await createVm(a.key, { plan: 'starter' })).body.vm_id;
      await refusedUnchanged(a.tenantId, () => createVm(a.key), 'disk_gib', 60, 60);
      // Stopped VMs keep their disks.
      assert.equal((await t.request('POST', `/v1/api/vms/${starter}/stop`, { key: a.key })).status, 200);
      await t.db.query(`UPDATE vms SET status = 'stopped' WHERE vm_id = $1`, [starter]);
      await refusedUnchanged(a.tenantId, () => createVm(a.key), 'disk_gib', 60, 60);
      // A capture takes its source VM's disk size again.
      const capture = () => t.request('POST', `/v1/api/vms/${starter}/capture`, { key: a.key, body: { name: 'lab' } });
      await refusedUnchanged(a.tenantId, capture, 'disk_gib', 60, 60);
      await setLimits(a.tenantId, { disk_gib: 70 });
      assert.equal((await capture()).status, 201);
      assert.deepEqual(await usage(a.key).then((u) => [u.templates, u.disk_gib]), [1, 70]);
      await setLimits(a.tenantId, { disk_gib: null });
      await refusedUnchanged(a.tenantId, capture, 'templates', 1, 1);
      // A failed capture keeps no disk image: it does not count.
      await t.db.query(`UPDATE templates SET status = 'failed' WHERE tenant_id = $1`, [a.tenantId]);
      assert.equal((await capture()).status, 201);
    });

    test('forkTemplate: over vms or disk_gib it is refused, nothing charged and the fork not counted', async () => {
      const a = await t.tenant({ card: '4242' });
      assert.equal((await createVm(a.key)).status, 201);
      await setLimits(a.tenantId, { vms: 1 });
      const fork = () => t.request('POST', '/v1/api/templates/echo-workspace/fork', { key: a.key, body: {} });
      await refusedUnchanged(a.tenantId, fork, 'vms', 1, 1);
      await setLimits(a.tenantId, { vms: null, disk_gib: 15 });
      await refusedUnchanged(a.tenantId, fork, 'disk_gib', 15, 10);
      await setLimits(a.tenantId, { disk_gib: 20 });
      assert.equal((await fork()).status, 201);
      assert.equal((await ledger(a.tenantId)).length, 2);
    });

    test('webhooks and api_keys: over the limit refused; deleting or revoking one makes room', async () => {
      const a = await t.tenant();
      await setLimits(a.tenantId, { webhooks: 1, api_keys: 2 });
      const hook = () => t.request('POST', '/v1/api/webhooks', { key: a.key, body: { url: 'https://hooks.example.com/agentvm', events: ['vm.stopped'] } });
      const first = await hook();
      assert.equal(first.status, 201);
      await refusedUnchanged(a.tenantId, hook, 'webhooks', 1, 1);
      assert.equal((await t.request('DELETE', `/v1/api/webhooks/${first.body.webhook_id}`, { key: a.key })).status, 200);
      assert.equal((await hook()).status, 201);

      const issue = () => t.request('POST', '/v1/api/keys', { key: a.key, body: { label: 'ci' } });
      const key = await issue();
      assert.equal(key.status, 201);
      await refusedUnchanged(a.tenantId, issue, 'api_keys', 2, 2);
      assert.equal((await t.request('DELETE', `/v1/api/keys/${key.body.key_id}`, { key: a.key })).status, 200);
      assert.equal((await issue()).status, 201, 'a revoked key does not count');
    });

    test('run_streams: open event streams count until they close; one over is refused before the stream begins', async () => {
      const a = await t.tenant();
      await setLimits(a.tenantId, { run_streams: 2 });
      const vmId = await insertVm(t.db, a.tenantId, { status: 'running' });
      const runId = newId('run');
      const [vm] = await t.db.query<{ boots: number }>('SELECT boots FROM vms WHERE vm_id = $1', [vmId]);
      await runStore.insert(t.db, {
        run_id: runId, tenant_id: a.tenantId, vm_id: vmId, task: 'hello', harness: 'echo', model: null, provider: null,
        argv: ['echo', 'hello'], env: {}, timeout_ms: 60_000, max_output_bytes: 1024, boots: vm.boots, created_at: new Date(),
      });
      // The app itself, for responses that stay open (the helper's request reads a body to its end).
      const app = buildApp({ services: t.services, log: quiet(), adminToken: t.adminToken, rateLimit: { perSecond: 10_000, burst: 10_000 } });
      const open = async () => {
        const res = await app.request(`/v1/api/vms/${vmId}/runs/${runId}/events`, { headers: { authorization: `Bearer ${a.key}` } });
        if (res.status !== 200) return { res, reader: null };
        const reader = res.body!.getReader();
        await reader.read(); // the stream's first frame: it is open
        return { res, reader };
      };
      const one = await open();
      const two = await open();
      assert.equal(one.res.status, 200);
      assert.equal(two.res.status, 200);
      assert.equal((await usage(a.key)).run_streams, 2);
      const three = await open();
      assert.equal(three.res.status, 403);
      const body = await three.res.json();
      assert.equal(body.error, 'quota_exceeded');
      assert.match(body.message, /^limit run_streams is 2 and the current count is 2\b/);
      // A closed stream frees its place at once.
      await one.reader!.cancel();
      await waitFor(async () => (await usage(a.key)).run_streams === 1);
      const four = await open();
      assert.equal(four.res.status, 200);
      await two.reader!.cancel();
      await four.reader!.cancel();
      await waitFor(async () => (await usage(a.key)).run_streams === 0);
    });

    test('run_streams: a lease that ran out is taken again only where there is room; else it lapses and its event stream ends', async () => {
      const a = await t.tenant();
      await setLimits(a.tenantId, { run_streams: 1 });
      const ranOut = async (lease: StreamLease) =>
        t.db.query('UPDATE stream_leases SET expires_at = $2 WHERE lease_id = $1', [lease.lease.lease_id, new Date(t.services.clock.now().getTime() - 1000)]);
      let lapsed = false;
      const first = await t.services.limits.openStream(a.tenantId, 'events');
      void first.lapsed.then(() => (lapsed = true));
      // Its renewals stalled past its end; nobody took the place: it is taken again.
      await ranOut(first);
      assert.equal((await usage(a.key)).run_streams, 0);
      await first.renew();
      assert.equal((await usage(a.key)).run_streams, 1);
      assert.equal(lapsed, false);
      // Ran out again, and another stream took the place meanwhile: the first lapses, the count stays at the limit.
      await ranOut(first);
      const second = await t.services.limits.openStream(a.tenantId, 'events');
      await first.renew();
      await first.lapsed;
      assert.equal((await usage(a.key)).run_streams, 1);
      await second.renew();
      assert.equal((await usage(a.key)).run_streams, 1, 'the second renews as before');
      await second.end();
      await first.end();
      assert.equal((await usage(a.key)).run_streams, 0);

      // An event stream whose lease lapses ends (its client's reader sees the end; the follow is aborted).
      let signal: AbortSignal | undefined;
      let lapse!: () => void;
      const fake = { end: async () => undefined, lapsed: new Promise<void>((r) => (lapse = r)) };
      const res = eventStreamResponse({ get: () => 'req_test' } as unknown as Context, fake, (_write, s) => ((signal = s), new Promise<void>((r) => s.addEventListener('abort', () => r()))));
      const reader = res.body!.getReader();
      await reader.read();
      lapse();
      assert.equal((await reader.read()).done, true);
      assert.equal(signal?.aborted, true);
    });

    test('`agentvm limits` and the MCP tool limits_get show the limits beside the usage; `agentvm admin limits set` changes them', async () => {
      const a = await t.tenant({ card: '4242' });
      await setLimits(a.tenantId, { vms: 7 });
      assert.equal((await createVm(a.key, { plan: 'pro' })).status, 201);
      const app = buildApp({ services: t.services, log: quiet(), adminToken: t.adminToken, rateLimit: { perSecond: 10_000, burst: 10_000 } });
      const server = await new Promise<ServerType>((resolve) => {
        const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
      });
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const configHome = await mkdtemp(path.join(os.tmpdir(), 'agentvm-limits-cli-'));
      try {
        const cli = (args: string[], extra: Record<string, string> = {}) =>
          new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
            const env = { ...process.env, AGENTVM_BASE_URL: url, AGENTVM_API_KEY: a.key, XDG_CONFIG_HOME: configHome, ...extra };
            execFile(process.execPath, [BIN, ...args], { env }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
          });
        const table = await cli(['limits']);
        assert.equal(table.code, 0, table.stderr);
        // Cells as words, whatever lines the table is drawn with.
        const rows = table.stdout.split('\n').map((line) => line.replace(/[^\w]+/g, ' ').trim());
        for (const row of ['limit value used', 'vms 7 1', 'vcpus 64 2', 'disk_gib 1000 50', 'run_streams 100 0']) assert.ok(rows.includes(row), `${row} in\n${table.stdout}`);
        // The operator's command: some limits set, one given back its default, the rest untouched.
        const env = { AGENTVM_ADMIN_TOKEN: t.adminToken };
        const set = await cli(['admin', 'limits', 'set', '--tenant', a.tenantId, '--running-vms', '5', '--vms', 'default'], env);
        assert.equal(set.code, 0, set.stderr);
        assert.match(set.stdout, /^vms: 50 \(used 1\)$/m);
        assert.match(set.stdout, /^running_vms: 5 \(used 1\)$/m);
        const bad = await cli(['admin', 'limits', 'set', '--tenant', a.tenantId, '--vcpus', '-3'], env);
        assert.equal(bad.code, 4);
        assert.match(bad.stderr, /--vcpus must be a whole number/);
        assert.equal((await t.request('GET', '/v1/api/limits', { key: a.key })).body.limits.vcpus, 64);
        await setLimits(a.tenantId, { vms: 7, running_vms: null });
        const json = await cli(['limits', '--json']);
        assert.equal(json.code, 0, json.stderr);
        assert.deepEqual(JSON.parse(json.stdout), (await t.request('GET', '/v1/api/limits', { key: a.key })).body);

        const mcp = new Client({ name: 'limits-test', version: '1.0.0' });
        await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${a.key}` } } }));
        try {
          const r = (await mcp.callTool({ name: 'limits_get', arguments: {} })) as { isError?: boolean; content: { text: string }[] };
          assert.notEqual(r.isError, true);
          const body = JSON.parse(r.content[0].text);
          assert.equal(body.limits.vms, 7);
          assert.equal(body.usage.memory_mib, 4096);
        } finally {
          await mcp.close();
        }
      } finally {
        server.close();
        await rm(configHome, { recursive: true, force: true });
      }
    });

    test('credits_exhausted: the stopped tier VM counts in vms and disk_gib, and in nothing else', async () => {
      const a = await t.tenant({ credits: 100 });
      const res = await createVm(a.key, { tier: 'ondemand' });
      assert.equal(res.status, 201);
      assert.deepEqual(await usage(a.key).then((u) => [u.vms, u.running_vms, u.vcpus, u.memory_mib, u.disk_gib]), [1, 1, 1, 1024, 10]);
      // What the host's metering does when the credits run out.
      assert.equal(await vmStore.stopTierVmsOfTenant(t.db, a.tenantId, new Date()), 1);
      const [row] = await t.db.query<{ status_reason: string; desired_state: string }>('SELECT status_reason, desired_state FROM vms WHERE vm_id = $1', [res.body.vm_id]);
      assert.deepEqual(row, { status_reason: 'credits_exhausted', desired_state: 'stopped' });
      assert.deepEqual(await usage(a.key).then((u) => [u.vms, u.running_vms, u.vcpus, u.memory_mib, u.disk_gib]), [1, 0, 0, 0, 10]);
      // On its host it holds its disk only: no CPU or memory in placement.
      const holding = await vmStore.listHoldingRoom(t.db, host.host_id);
      const mine = holding.find((v) => v.vm_id === res.body.vm_id)!;
      assert.deepEqual([mine.running, mine.suspended, mine.disk_gib], [false, false, 10]);
    });
  });
}

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;

describe('run_streams with shells, in a real microVM', { skip: imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)' }, () => {
  let dataDir: string;
  let server: RunningServer;
  let key: string;
  let tenantId: string;
  let adminToken: string;
  let vmId: string;
  const call = async (method: string, p: string, body?: unknown, bearer = key) => {
    const res = await fetch(`${server.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
  };

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-limits-'));
    adminToken = 'avm_admin_limits_token_0123456789abcdefghijkl';
    process.env.AGENTVM_ADMIN_TOKEN = adminToken;
    const config = { ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }), imageDir: imageDir! };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    server = await startServer(config, quiet());
    await server.host.imageReady;
    const tenant = await call('POST', '/v1/admin/tenants', { email: 'limits@example.com' }, adminToken);
    tenantId = tenant.body.tenant_id;
    key = tenant.body.api_key;
    await call('PUT', `/v1/admin/tenants/${tenantId}/card`, { brand: 'visa', last4: '4242' }, adminToken);
    await server.host.prewarmed;
    const created = await call('POST', '/v1/api/vms', { harness: 'echo', egress: { mode: 'none', allow: [] } });
    assert.equal(created.status, 201, created.text);
    vmId = created.body.vm_id;
    await until(`${vmId} running`, async () => {
      const vm = (await call('GET', `/v1/api/vms/${vmId}`)).body;
      if (vm.status === 'failed') throw new Error(`failed: ${vm.status_reason}`);
      return vm.status === 'running';
    });
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a shell counts from its ticket while its socket is open; its close frees the place; one over is refused', async () => {
    assert.equal((await call('PUT', `/v1/admin/tenants/${tenantId}/limits`, { run_streams: 2 }, adminToken)).status, 200);
    const ticket = () => call('POST', `/v1/api/vms/${vmId}/shell`);
    const first = await ticket();
    assert.equal(first.status, 201, first.text);
    const ws = new WebSocket(first.body.url);
    await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
    const second = await ticket();
    assert.equal(second.status, 201, second.text);
    const usage = async () => (await call('GET', '/v1/api/limits')).body.usage.run_streams;
    assert.equal(await usage(), 2);
    const third = await ticket();
    assert.equal(third.status, 403, third.text);
    assert.equal(third.body.error, 'quota_exceeded');
    assert.match(third.body.message, /^limit run_streams is 2 and the current count is 2\b/);
    ws.close();
    await until('the closed shell frees its place', async () => (await usage()) === 1, 30_000);
    const fourth = await ticket();
    assert.equal(fourth.status, 201, fourth.text);
  });
});

async function waitFor(fn: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
