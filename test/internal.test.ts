/**
 * The internal endpoint between API replicas and VM hosts: the host validates every call against the
 * contract and answers in the public Error shape; the replica passes the host's customer-facing
 * answers on. The executor here is a stand-in for a host's guests (test/scaleout.test.ts runs the
 * real one, with real VMs, across processes).
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { serve, type ServerType } from '@hono/node-server';
import { Writable } from 'node:stream';
import { buildInternalApp } from '../src/host/internalApp.ts';
import { RemoteHosts } from '../src/replica/remoteHosts.ts';
import { ApiError } from '../src/domain/errors.ts';
import { createLogger } from '../src/log.ts';
import type { VmExecutor } from '../src/domain/runs.ts';
import { freshDb } from './helpers.ts';

const TOKEN = 'avm_internal_test_0123456789abcdefghijklmnopq';
const log = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

const kicked: string[] = [];
const executor: VmExecutor = {
  harnesses: async (vmId) => (vmId === 'vm_up' ? ['echo'] : null),
  kickRuns: (vmId) => void kicked.push(vmId),
  cancelRun: async (_vmId, runId) => {
    if (runId === 'run_explode') throw new Error('secret detail of the host');
    if (runId === 'run_gone') throw new ApiError('vm_not_running', 'the VM is stopped');
  },
  setSecrets: async (_vmId, set) => ({ names: Object.keys(set).filter((k) => set[k] !== null && k !== 'BROKERED'), brokered: 'BROKERED' in set ? ['BROKERED'] : [] }),
};
const app = buildInternalApp({ token: TOKEN, executor, guest: null, capture: () => undefined, probe: async () => ({ usable: true, accel: 'tcg', qemu: 'q', detail: 'ok' }), log });
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
  const noVms = buildInternalApp({ token: TOKEN, executor: null, guest: null, capture: null, probe: async () => ({ usable: false, accel: null, qemu: null, detail: 'no qemu' }), log });
  const refused = await noVms.request('/internal/vms/vm_up/harnesses', { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(refused.status, 503);
  assert.equal((await refused.json()).error, 'unavailable');
});

test("the replica tells the host of queued runs and passes a host's customer-facing answers on", async (t) => {
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as { port: number }).port;
  const { db, drop } = await freshDb({ name: 'pglite' });
  after(drop);
  await db.query(
    `INSERT INTO hosts (host_id, name, accel, vcpus_total, memory_mib_total, disk_gib_total, heartbeat_at, internal_url)
     VALUES ('host_a', 'a', 'tcg', 4, 4096, 100, now(), $1)`,
    [`http://127.0.0.1:${port}`],
  );
  await db.query(`INSERT INTO tenants (tenant_id, email) VALUES ('ten_a', 'a@example.com')`);
  await db.query(
    `INSERT INTO vms (vm_id, tenant_id, host_id, plan, cycle, harness, vcpus, memory_mib, disk_gib, status, desired_state)
     VALUES ('vm_up', 'ten_a', 'host_a', 'starter', 'monthly', 'echo', 1, 1024, 10, 'running', 'running')`,
  );
  const remote = new RemoteHosts(db, TOKEN, log);
  assert.deepEqual(await remote.harnesses('vm_up'), ['echo']);
  assert.deepEqual(await remote.setSecrets('vm_up', { A: 'x', B: null, BROKERED: 'k' }), { names: ['A'], brokered: ['BROKERED'] });
  remote.kickRuns('vm_up');
  for (let i = 0; i < 100 && !kicked.length; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(kicked, ['vm_up']);
  await remote.cancelRun('vm_up', 'run_fine');
  // The host's answer for a VM that is not running is the customer's: passed on as itself.
  await assert.rejects(remote.cancelRun('vm_up', 'run_gone'), (err: unknown) => err instanceof ApiError && err.code === 'vm_not_running');
  // A host's internal failure stays the host's: the replica gets an error, not the host's detail.
  await assert.rejects(remote.cancelRun('vm_up', 'run_explode'), (err: unknown) => !(err instanceof ApiError) && !String(err).includes('secret detail'));
});
