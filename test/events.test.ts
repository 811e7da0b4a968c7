/**
 * Lifecycle hygiene without QEMU: the event feed written with each change and paged by cursor, the
 * 30-day prune, PATCH of idle stop and expiry, idle stop and expiry themselves (against a clock the
 * test moves), the ledger and each VM's cost this month.
 */
import { describe, test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, insertVm, ManualClock, until, type TestApp } from './helpers.ts';
import * as runStore from '../src/store/runs.ts';
import * as egressStore from '../src/store/egress.ts';
import { newId } from '../src/domain/ids.ts';
import { LifecycleJob } from '../src/jobs/lifecycle.ts';
import { createLogger } from '../src/log.ts';
import { Writable } from 'node:stream';

const quiet = createLogger('error', new Writable({ write: (_c, _e, cb) => cb() }));
const HOST = { host_id: 'host_test', name: 'test', accel: 'tcg', image_id: 'img_test', vcpus_total: 64, memory_mib_total: 64 * 1024, disk_gib_total: 10_000 };

for (const backend of backends()) {
  describe(`events, ledger, idle stop and expiry on ${backend.name}`, () => {
    let t: TestApp;
    let clock: ManualClock;
    let job: LifecycleJob;
    beforeEach(async () => {
      clock = new ManualClock(Date.parse('2026-11-10T12:00:00Z'));
      t = await createTestApp(backend, { clock });
      await t.services.hosts.register(HOST);
      job = new LifecycleJob({ services: t.services, log: quiet });
    });
    afterEach(() => t.close());

    const events = async (key: string, query = '') => t.request('GET', `/v1/api/events${query}`, { key });
    const allEvents = async (key: string) => {
      const out: any[] = [];
      let after = '';
      for (;;) {
        const page = await events(key, `?limit=2${after ? `&after=${after}` : ''}`);
        assert.equal(page.status, 200, page.text);
        out.push(...page.body.data);
        if (!page.body.has_more) return out;
        after = page.body.data[page.body.data.length - 1].event_id;
      }
    };

    test('each change writes its event with the object as the API showed it; the feed pages oldest first by cursor', async () => {
      const tenant = await t.tenant({ card: '4242' });
      // The tenant's first key was issued with the tenant: its key.issued is the first event.
      const created = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { harness: 'echo', auto_stop_after_s: 900 } });
      assert.equal(created.status, 201, created.text);
      const vmId = created.body.vm_id;
      const issued = await t.request('POST', '/v1/api/keys', { key: tenant.key, body: { label: 'ci' } });
      await t.request('DELETE', `/v1/api/keys/${issued.body.key_id}`, { key: tenant.key });
      await t.request('DELETE', `/v1/api/keys/${issued.body.key_id}`, { key: tenant.key }); // a second revoke reports nothing
      const stopped = await t.request('POST', `/v1/api/vms/${vmId}/stop`, { key: tenant.key });
      assert.equal(stopped.body.status, 'stopping');
      const deleted = await t.request('DELETE', `/v1/api/vms/${vmId}`, { key: tenant.key });
      assert.equal(deleted.status, 200);

      const feed = await allEvents(tenant.key);
      assert.deepEqual(
        feed.map((e) => e.type),
        ['key.issued', 'vm.created', 'key.issued', 'key.revoked', 'vm.deleted'],
      );
      assert.equal(new Set(feed.map((e) => e.event_id)).size, feed.length);
      const vmCreated = feed[1];
      assert.equal(vmCreated.data.vm_id, vmId);
      assert.equal(vmCreated.data.status, 'provisioning');
      assert.equal(vmCreated.data.auto_stop_after_s, 900);
      assert.equal(vmCreated.data.cost_cents_month, 1900, 'the starter plan charged with the create');
      assert.equal(feed[2].data.key_id, issued.body.key_id);
      assert.ok(!JSON.stringify(feed).includes(issued.body.key), 'a key event never carries the plaintext');
      assert.equal(feed[3].data.revoked_at !== null, true);
      assert.equal(feed[4].data.status, 'deleted');

      // After the last event there is nothing yet; a cursor from the middle gives the rest.
      const last = feed[feed.length - 1].event_id;
      assert.deepEqual((await events(tenant.key, `?after=${last}`)).body, { data: [], has_more: false });
      const rest = await events(tenant.key, `?after=${feed[2].event_id}&limit=200`);
      assert.deepEqual(rest.body.data.map((e: any) => e.type), ['key.revoked', 'vm.deleted']);

      // Another tenant sees none of it.
      const other = await t.tenant();
      assert.deepEqual((await allEvents(other.key)).map((e) => e.type), ['key.issued']);
    });

    test('a failed create writes no event: the event is in the transaction of its change', async () => {
      const tenant = await t.tenant({ card: '0002' }); // declined
      const res = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} });
      assert.equal(res.status, 402);
      assert.deepEqual((await allEvents(tenant.key)).map((e) => e.type), ['key.issued']);
    });

    test('bad cursors and limits are 400 naming the parameter', async () => {
      const tenant = await t.tenant();
      for (const [query, field] of [['?limit=0', 'limit'], ['?limit=201', 'limit'], ['?after=nope', 'after'], ['?after=vm_x', 'after'], ['?since=1', 'since']]) {
        const res = await events(tenant.key, query);
        assert.equal(res.status, 400, query);
        assert.equal(res.body.error, 'invalid_request');
        assert.ok(res.body.message.startsWith(field), `${query}: ${res.body.message}`);
      }
    });

    test('events older than 30 days are pruned; a cursor of a pruned event still works', async () => {
      const tenant = await t.tenant();
      const first = (await allEvents(tenant.key))[0];
      clock.t += 31 * 24 * 3600_000;
      await t.request('POST', '/v1/api/keys', { key: tenant.key, body: {} });
      await job.tick();
      const left = await allEvents(tenant.key);
      assert.deepEqual(left.map((e) => e.type), ['key.issued']);
      assert.notEqual(left[0].event_id, first.event_id);
      assert.deepEqual((await events(tenant.key, `?after=${first.event_id}`)).body.data.map((e: any) => e.event_id), [left[0].event_id]);
    });

    test('PATCH sets and clears idle stop and expiry; bad values and unknown fields are 400 naming the field and change nothing', async () => {
      const tenant = await t.tenant({ card: '4242' });
      const vmId = (await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { harness: 'echo' } })).body.vm_id;
      const patch = (body: unknown) => t.request('PATCH', `/v1/api/vms/${vmId}`, { key: tenant.key, body });
      const at = new Date(clock.t + 2 * 3600_000).toISOString();
      const set = await patch({ auto_stop_after_s: 900, expires_at: at });
      assert.equal(set.status, 200, set.text);
      assert.equal(set.body.auto_stop_after_s, 900);
      assert.equal(set.body.expires_at, at);
      const bad: Array<[unknown, string]> = [
        [{ auto_stop_after_s: 59 }, 'auto_stop_after_s'],
        [{ auto_stop_after_s: 604_801 }, 'auto_stop_after_s'],
        [{ auto_stop_after_s: 90.5 }, 'auto_stop_after_s'],
        [{ auto_stop_after_s: '900' }, 'auto_stop_after_s'],
        [{ expires_at: 'tomorrow' }, 'expires_at'],
        [{ expires_at: '2026-11-10 13:00:00' }, 'expires_at'],
        [{ expires_at: new Date(clock.t - 1000).toISOString() }, 'expires_at'],
        [{ plan: 'pro' }, 'plan'],
        [{ auto_stop_after_s: 600, status: 'stopped' }, 'status'],
      ];
      for (const [body, field] of bad) {
        const res = await patch(body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.ok(res.body.message.startsWith(`${field}:`), `${JSON.stringify(body)}: ${res.body.message}`);
      }
      const unchanged = await t.request('GET', `/v1/api/vms/${vmId}`, { key: tenant.key });
      assert.equal(unchanged.body.auto_stop_after_s, 900);
      assert.equal(unchanged.body.expires_at, at);
      const partial = await patch({ expires_at: null });
      assert.equal(partial.body.expires_at, null);
      assert.equal(partial.body.auto_stop_after_s, 900, 'a field left out keeps its value');
      assert.equal((await patch({ auto_stop_after_s: null })).body.auto_stop_after_s, null);
      // Create and fork take the same fields, checked the same way.
      const past = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { expires_at: '2020-01-01T00:00:00Z' } });
      assert.equal(past.status, 400);
      assert.match(past.body.message, /^expires_at:/);
      const short = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { auto_stop_after_s: 10 } });
      assert.match(short.body.message, /^auto_stop_after_s:/);
      assert.equal((await t.request('PATCH', '/v1/api/vms/vm_nope', { key: tenant.key, body: {} })).status, 404);
    });

    test('idle stop: not while a run is queued or running, nor soon after one or after egress traffic; then stopped with reason idle, once', async () => {
      const tenant = await t.tenant();
      const vmId = await insertVm(t.db, tenant.tenantId);
      await t.db.query('UPDATE vms SET booted_at = $2, created_at = $2 WHERE vm_id = $1', [vmId, clock.now()]);
      await t.request('PATCH', `/v1/api/vms/${vmId}`, { key: tenant.key, body: { auto_stop_after_s: 600 } });
      const runId = newId('run');
      await runStore.insert(t.db, {
        run_id: runId, tenant_id: tenant.tenantId, vm_id: vmId, task: 'think for an hour', harness: 'echo', model: null, provider: null,
        argv: ['true'], env: {}, timeout_ms: 7200_000, max_output_bytes: 1024, boots: 0, created_at: clock.now(),
      });
      await runStore.markRunning(t.db, runId, clock.now());
      const status = async () => (await t.request('GET', `/v1/api/vms/${vmId}`, { key: tenant.key })).body;

      // A run that thinks for an hour, with no output and no traffic, keeps the VM up.
      clock.t += 3600_000;
      await job.tick();
      assert.equal((await status()).status, 'running');
      await runStore.finish(t.db, runId, { status: 'succeeded', exit_code: 0, timed_out: false, duration_ms: 3600_000, first_output_ms: null, status_reason: null, finished_at: clock.now() });
      clock.t += 599_000;
      await job.tick();
      assert.equal((await status()).status, 'running', 'not yet idle for 600 s since the run ended');
      await egressStore.logConnection(t.db, vmId, { at: clock.now(), host: 'api.anthropic.com', port: 443, decision: 'allowed', reason: 'allowlist' });
      clock.t += 599_000;
      await job.tick();
      assert.equal((await status()).status, 'running', 'egress traffic is activity');
      clock.t += 2000;
      await Promise.all([job.tick(), new LifecycleJob({ services: t.services, log: quiet }).tick()]);
      const vm = await status();
      assert.equal(vm.status, 'stopping');
      assert.equal(vm.status_reason, 'idle');
      const [row] = await t.db.query<{ desired_state: string }>('SELECT desired_state FROM vms WHERE vm_id = $1', [vmId]);
      assert.equal(row.desired_state, 'stopped');
    });

    test('a running job destroys a VM at its expiry when that comes before its next pass', async () => {
      const tenant = await t.tenant({ card: '4242' });
      const created = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { harness: 'echo', expires_at: new Date(clock.t + 2000).toISOString() } });
      assert.equal(created.status, 201, created.text);
      // A pass a minute apart: only the pass at the expiry can destroy it in time.
      const started = new LifecycleJob({ services: t.services, log: quiet, intervalMs: 60_000 });
      started.start();
      try {
        await started.tick();
        assert.equal((await t.request('GET', `/v1/api/vms/${created.body.vm_id}`, { key: tenant.key })).status, 200);
        clock.t += 2000;
        await until('the VM destroyed at its expiry', async () => (await t.request('GET', `/v1/api/vms/${created.body.vm_id}`, { key: tenant.key })).status === 404, 30_000);
      } finally {
        await started.stop();
      }
    });

    test('expiry destroys the VM: final metering, status_reason expired in its vm.deleted event, and no more draws', async () => {
      const tenant = await t.tenant({ credits: 5000 });
      const created = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { tier: 'ondemand', harness: 'echo', expires_at: new Date(clock.t + 3600_000).toISOString() } });
      assert.equal(created.status, 201, created.text);
      const vmId = created.body.vm_id;
      // Running (as its host would mark it) since now; an hour later it expires.
      await t.db.query(`UPDATE vms SET status = 'running', metered_until = $2 WHERE vm_id = $1`, [vmId, clock.now()]);
      clock.t += 3600_000 - 1;
      await job.tick();
      assert.equal((await t.request('GET', `/v1/api/vms/${vmId}`, { key: tenant.key })).status, 200);
      clock.t += 1;
      await Promise.all([job.tick(), new LifecycleJob({ services: t.services, log: quiet }).tick()]);
      assert.equal((await t.request('GET', `/v1/api/vms/${vmId}`, { key: tenant.key })).status, 404);
      const draws = await t.db.query<{ amount_cents: number }>(`SELECT amount_cents FROM ledger WHERE vm_id = $1 AND kind = 'credit_draw'`, [vmId]);
      assert.deepEqual(draws.map((d) => d.amount_cents), [12], 'one hour on demand, drawn once');
      const feed = await allEvents(tenant.key);
      const deleted = feed.filter((e) => e.type === 'vm.deleted');
      assert.equal(deleted.length, 1);
      assert.equal(deleted[0].data.status_reason, 'expired');
      assert.equal(deleted[0].data.cost_cents_month, 12);
      clock.t += 3600_000;
      await job.tick();
      const after = await t.db.query(`SELECT 1 FROM ledger WHERE vm_id = $1 AND kind = 'credit_draw'`, [vmId]);
      assert.equal(after.length, 1, 'nothing drawn after the expiry');
    });

    test('the ledger pages newest first; a VM shows what it cost this month', async () => {
      const tenant = await t.tenant({ card: '4242', credits: 1000 });
      const a = (await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { plan: 'pro' } })).body.vm_id;
      const b = (await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} })).body.vm_id;
      const page1 = await t.request('GET', '/v1/api/billing/ledger?limit=2', { key: tenant.key });
      assert.equal(page1.status, 200, page1.text);
      assert.equal(page1.body.total, 3);
      assert.equal(page1.body.has_more, true);
      assert.equal(page1.body.next_offset, 2);
      assert.deepEqual(page1.body.data.map((e: any) => [e.kind, e.amount_cents, e.vm_id]), [['card_charge', 1900, b], ['card_charge', 4900, a]]);
      assert.match(page1.body.data[0].entry_id, /^led_\d+$/);
      const page2 = await t.request('GET', '/v1/api/billing/ledger?limit=2&offset=2', { key: tenant.key });
      assert.deepEqual(page2.body.data.map((e: any) => [e.kind, e.credits_delta_cents]), [['credit_purchase', 1000]]);
      assert.equal(page2.body.has_more, false);
      assert.equal(page2.body.next_offset, null);
      assert.equal((await t.request('GET', '/v1/api/billing/ledger?limit=101', { key: tenant.key })).status, 400);
      const vms = (await t.request('GET', '/v1/api/vms', { key: tenant.key })).body.data;
      assert.deepEqual(Object.fromEntries(vms.map((v: any) => [v.vm_id, v.cost_cents_month])), { [a]: 4900, [b]: 1900 });
      // Next month, nothing yet.
      clock.t = Date.parse('2026-12-01T00:00:00Z');
      assert.equal((await t.request('GET', `/v1/api/vms/${a}`, { key: tenant.key })).body.cost_cents_month, 0);
      const other = await t.tenant();
      assert.equal((await t.request('GET', '/v1/api/billing/ledger', { key: other.key })).body.total, 0);
    });
  });
}
