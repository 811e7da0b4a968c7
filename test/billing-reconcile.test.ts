/**
 * Zombie-proof billing without QEMU: drift written straight into the rows (watermarks open on VMs
 * that are not running, a plan VM metered, a running tier VM not metered, draws naming a plan VM) is
 * caught by the lifecycle job's reconciliation, logged, and fixed where the rule is clear; a VM its
 * host changed a moment ago is left alone; a second pass finds nothing left to fix.
 */
import { describe, test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { backends, createTestApp, insertVm, ManualClock, type TestApp } from './helpers.ts';
import { LifecycleJob } from '../src/jobs/lifecycle.ts';
import { createLogger } from '../src/log.ts';

for (const backend of backends()) {
  describe(`billing reconciliation on ${backend.name}`, () => {
    let t: TestApp;
    let clock: ManualClock;
    let lines: string[];
    let job: LifecycleJob;
    beforeEach(async () => {
      clock = new ManualClock(Date.now() + 3600_000);
      t = await createTestApp(backend, { clock });
      lines = [];
      const log = createLogger('info', new Writable({ write: (c, _e, cb) => (lines.push(c.toString()), cb()) }));
      job = new LifecycleJob({ services: t.services, log, reconcileEveryMs: 60_000 });
    });
    afterEach(() => t.close());

    const row = async (vmId: string) =>
      (await t.db.query<{ metered_until: Date | null; unbilled_ms: number; status: string }>('SELECT metered_until, unbilled_ms, status FROM vms WHERE vm_id = $1', [vmId]))[0];
    const setRow = (vmId: string, set: string, values: unknown[] = []) => t.db.query(`UPDATE vms SET ${set} WHERE vm_id = $1`, [vmId, ...values]);

    test('drift injected into the rows is caught, logged and fixed; a second pass finds none', async () => {
      const tenant = await t.tenant({ credits: 1000 });
      const old = new Date(clock.t - 3600_000);
      const stopped = await insertVm(t.db, tenant.tenantId, { tier: 'ondemand', status: 'stopped' });
      const failed = await insertVm(t.db, tenant.tenantId, { tier: 'spot', status: 'failed' });
      const deleted = await insertVm(t.db, tenant.tenantId, { tier: 'ondemand', status: 'stopped', deleted: true });
      const plan = await insertVm(t.db, tenant.tenantId, { plan: 'starter' });
      const unmetered = await insertVm(t.db, tenant.tenantId, { tier: 'ondemand', status: 'running' });
      const healthy = await insertVm(t.db, tenant.tenantId, { tier: 'ondemand', status: 'running' });
      const busy = await insertVm(t.db, tenant.tenantId, { tier: 'ondemand', status: 'failed' });
      for (const vm of [stopped, failed, deleted, plan]) await setRow(vm, 'metered_until = $2, unbilled_ms = 1234, updated_at = $2', [old]);
      await setRow(unmetered, 'updated_at = $2', [old]);
      await setRow(healthy, 'metered_until = $2, updated_at = $3', [new Date(clock.t - 5000), old]);
      // Its host changed it a moment ago (a boot that failed, its metering about to end): not touched.
      await setRow(busy, 'metered_until = $2, updated_at = $3', [old, new Date(clock.t - 1000)]);
      await t.db.query(
        `INSERT INTO ledger (tenant_id, kind, amount_cents, credits_delta_cents, vm_id, description, created_at)
         VALUES ($1, 'credit_draw', 3, -3, $2, 'ondemand running time', $3)`,
        [tenant.tenantId, plan, old],
      );
      const balance = async () => (await t.services.billing.get(tenant.tenantId))!.credits_cents;
      const before = await balance();

      await job.tick();
      const found = await job.billing.check();
      assert.deepEqual(found.map((d) => d.kind), ['draw_for_plan_vm'], 'the first pass fixed everything fixable');

      assert.equal((await row(stopped)).metered_until, null, 'a stopped tier VM draws nothing');
      assert.equal((await row(stopped)).unbilled_ms, 1234, 'its remainder carries to its next run');
      assert.equal((await row(failed)).metered_until, null, 'a failed VM is not metered');
      assert.equal((await row(deleted)).metered_until, null);
      assert.equal((await row(deleted)).unbilled_ms, 0);
      assert.equal((await row(plan)).metered_until, null, 'plan VMs are never metered');
      assert.equal(new Date((await row(unmetered)).metered_until!).getTime(), clock.t, 'a running tier VM is metered from now');
      assert.equal(new Date((await row(healthy)).metered_until!).getTime(), clock.t - 5000, 'a healthy VM is left alone');
      assert.equal(new Date((await row(busy)).metered_until!).getTime(), old.getTime(), 'a VM its host just changed is left to the host');
      assert.equal(await balance(), before, 'fixes draw nothing');

      const logged = lines.join('');
      for (const vm of [stopped, failed, deleted]) assert.match(logged, new RegExp(`"drift":"open_watermark_not_running"[^\\n]*"vm_id":"${vm}"`));
      assert.match(logged, new RegExp(`"drift":"plan_vm_metered"[^\\n]*"vm_id":"${plan}"`));
      assert.match(logged, new RegExp(`"drift":"running_not_metered"[^\\n]*"vm_id":"${unmetered}"`));
      assert.match(logged, new RegExp(`"drift":"draw_for_plan_vm"[^\\n]*"vm_id":"${plan}"`));

      // Later the busy VM has settled without its host closing the watermark: now it is caught.
      clock.t += 120_000;
      await setRow(healthy, 'metered_until = $2', [new Date(clock.t - 5000)]);
      const later = await job.billing.check();
      assert.deepEqual(later.filter((d) => d.fixed).map((d) => [d.kind, d.vm_id]), [['open_watermark_not_running', busy]]);
    });

    test('a running tier VM whose watermark stopped moving is reported, not changed', async () => {
      const tenant = await t.tenant({ credits: 1000 });
      const vm = await insertVm(t.db, tenant.tenantId, { tier: 'spot', status: 'running' });
      const since = new Date(clock.t - 30 * 60_000);
      await setRow(vm, 'metered_until = $2, updated_at = $2', [since]);
      const found = await job.billing.check();
      assert.deepEqual(found.map((d) => [d.kind, d.vm_id, d.fixed]), [['stale_watermark', vm, false]]);
      assert.equal(new Date((await row(vm)).metered_until!).getTime(), since.getTime());
    });
  });
}
