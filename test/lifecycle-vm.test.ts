/**
 * Idle stop and expiry on real microVMs: a VM set to stop after 60 idle seconds stays up through an
 * 80-second ticker run (a run is activity, output or not), stops once the run has been over for a
 * minute, and its signed vm.stopped webhook arrives; a tier VM past its expiry is destroyed, drawn
 * for its running time once, and drawn nothing more.
 * Needs a built guest image: AGENTVM_TEST_IMAGE_DIR (npm run test:all sets it).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { startServer, type RunningServer } from '../src/server.ts';
import { createLogger } from '../src/log.ts';
import { apiClient, killQemusUnder, seedSnapshots, until } from './helpers.ts';

const imageDir = process.env.AGENTVM_TEST_IMAGE_DIR;
const skip = imageDir ? false : 'set AGENTVM_TEST_IMAGE_DIR to a built image dir (npm run test:all does)';
const ADMIN = 'avm_admin_test_token_lifecycle_0123456789ab';


// The two tests mostly wait (a run of 80 s, a minute idle, an expiry two minutes on), each with a VM and
// a tenant of its own: they run side by side.
describe('idle stop and expiry on real microVMs', { skip, concurrency: true }, () => {
  let dataDir: string;
  let server: RunningServer;
  let receiver: Server;
  const hooks: Array<{ body: string; signature: string }> = [];
  let hookUrl = '';

  before(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-lifecycle-'));
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        hooks.push({ body, signature: String(req.headers['agentvm-signature']) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
    process.env.AGENTVM_ADMIN_TOKEN = ADMIN;
    const config = {
      ...loadConfig({ host: '127.0.0.1', port: 0, dataDir }),
      imageDir: imageDir!,
      lifecycleIntervalMs: 1000,
      meterIntervalMs: 2000,
      webhookAllowHosts: new Set(['127.0.0.1']),
    };
    delete process.env.AGENTVM_ADMIN_TOKEN;
    await seedSnapshots(dataDir);
    server = await startServer(config, createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })));
    await server.host.imageReady;
  });

  after(async () => {
    await server?.close({ stopVms: true });
    await killQemusUnder(dataDir);
    await new Promise((r) => receiver.close(r));
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a VM set to stop after 60 idle seconds stays up through an 80-second run, then stops (idle) and a signed vm.stopped arrives', { timeout: 10 * 60_000 }, async () => {
    const admin = apiClient(server.url, ADMIN);
    const tenant = (await admin('POST', '/v1/admin/tenants', { email: 'idle@example.com' })).body;
    await admin('PUT', `/v1/admin/tenants/${tenant.tenant_id}/card`, { brand: 'visa', last4: '4242' });
    const api = apiClient(server.url, tenant.api_key);
    const hook = (await api('POST', '/v1/api/webhooks', { url: hookUrl, events: ['vm.stopped'] })).body;
    const vmId = (await api('POST', '/v1/api/vms', { harness: 'ticker', auto_stop_after_s: 60 })).body.vm_id;
    await until('running', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'running', 5 * 60_000);

    const lines = Array.from({ length: 80 }, (_, i) => `tick ${i + 1}`);
    const run = (await api('POST', `/v1/api/vms/${vmId}/run`, { task: lines.join('\n') }, { Prefer: 'respond-async' })).body;
    const finished = await until('the run finished', async () => {
      const r = (await api('GET', `/v1/api/vms/${vmId}/runs/${run.run_id}`)).body;
      assert.equal((await api('GET', `/v1/api/vms/${vmId}`)).body.status, 'running', 'stopped in the middle of a run');
      return r.status !== 'queued' && r.status !== 'running' ? r : undefined;
    }, 5 * 60_000);
    assert.equal(finished.status, 'succeeded');
    assert.ok(finished.duration_ms > 60_000, `the run took ${finished.duration_ms} ms, longer than the idle limit`);
    const ended = Date.now();

    const stopped = await until('stopped for idleness', async () => {
      const vm = (await api('GET', `/v1/api/vms/${vmId}`)).body;
      return vm.status === 'stopped' ? vm : undefined;
    }, 3 * 60_000);
    assert.equal(stopped.status_reason, 'idle');
    assert.ok(Date.now() - ended >= 55_000, 'not stopped before a minute without activity');

    const delivered = await until('the vm.stopped webhook', async () => hooks.find((h) => JSON.parse(h.body).data.vm_id === vmId), 60_000);
    const event = JSON.parse(delivered.body);
    assert.equal(event.type, 'vm.stopped');
    assert.equal(event.data.status_reason, 'idle');
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(delivered.signature)!;
    assert.equal(createHmac('sha256', hook.secret).update(`${t}.${delivered.body}`).digest('hex'), v1);
  });

  test('a tier VM past its expiry is destroyed: disks removed, drawn for its running time, then nothing more', { timeout: 10 * 60_000 }, async () => {
    const admin = apiClient(server.url, ADMIN);
    const tenant = (await admin('POST', '/v1/admin/tenants', { email: 'expiry@example.com' })).body;
    await admin('POST', `/v1/admin/tenants/${tenant.tenant_id}/credits`, { amount_cents: 5000 });
    const api = apiClient(server.url, tenant.api_key);
    const expires = new Date(Date.now() + 120_000).toISOString();
    const vmId = (await api('POST', '/v1/api/vms', { tier: 'ondemand', harness: 'echo', expires_at: expires })).body.vm_id;
    await until('running', async () => (await api('GET', `/v1/api/vms/${vmId}`)).body.status === 'running', 5 * 60_000);
    await until('gone', async () => (await api('GET', `/v1/api/vms/${vmId}`)).status === 404, 5 * 60_000);
    assert.ok(Date.now() >= Date.parse(expires), 'not destroyed before its time');
    await until('its disks removed', async () => {
      const [row] = await server.services.db.query<{ disks_removed_at: Date | null }>('SELECT disks_removed_at FROM vms WHERE vm_id = $1', [vmId]);
      return row.disks_removed_at !== null;
    }, 60_000);
    const events = (await api('GET', '/v1/api/events?limit=200')).body.data;
    const deleted = events.find((e: any) => e.type === 'vm.deleted');
    assert.equal(deleted.data.status_reason, 'expired');
    const drawn = async () =>
      (await server.services.db.query<{ n: number; cents: number }>(`SELECT count(*)::int AS n, coalesce(sum(amount_cents), 0) AS cents FROM ledger WHERE vm_id = $1 AND kind = 'credit_draw'`, [vmId]))[0];
    const atDeletion = await drawn();
    assert.ok(atDeletion.cents >= 1, 'its running time was drawn');
    assert.equal(deleted.data.cost_cents_month, atDeletion.cents);
    await new Promise((r) => setTimeout(r, 6000));
    assert.deepEqual(await drawn(), atDeletion, 'nothing drawn after the expiry');
  });
});
