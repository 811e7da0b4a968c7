/**
 * createVM and destroyVM against the database: money, Idempotency-Key, placement, metering. No QEMU
 * here: a registered host row is enough for the API side; vm-real.test.ts boots real VMs.
 */
import { describe, test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { backends, createTestApp, insertVm, ManualClock, type TestApp } from './helpers.ts';
import { freshVmIds } from '../src/domain/vmPlacement.ts';
import { meterReading, meterVm } from '../src/domain/metering.ts';

describe('metering arithmetic', () => {
  test('whatever the readings, the cents drawn equal the running time at the tier rate, rounded down, the rest carried', () => {
    fc.assert(
      fc.property(fc.constantFrom('ondemand' as const, 'spot' as const), fc.array(fc.integer({ min: 0, max: 4 * 3_600_000 }), { maxLength: 40 }), (tier, gaps) => {
        let unbilled = 0;
        let drawn = 0;
        for (const gap of gaps) {
          const r = meterReading(tier, unbilled, gap, false);
          drawn += r.cents;
          unbilled = unbilled + gap - r.msCovered(r.cents);
        }
        const rate = tier === 'ondemand' ? 12 : 4;
        const total = gaps.reduce((a, b) => a + b, 0);
        assert.equal(drawn, Math.floor((total * rate) / 3_600_000));
        assert.ok(unbilled >= 0 && unbilled < 3_600_000 / rate);
      }),
    );
  });

  test('a final reading rounds a part-cent up; one hour on demand is 12 cents, on spot 4', () => {
    assert.equal(meterReading('ondemand', 0, 3_600_000, false).cents, 12);
    assert.equal(meterReading('spot', 0, 3_600_000, false).cents, 4);
    assert.equal(meterReading('ondemand', 0, 1000, false).cents, 0);
    assert.equal(meterReading('ondemand', 0, 1000, true).cents, 1);
    assert.equal(meterReading('ondemand', 0, 0, true).cents, 0);
  });
});

for (const backend of backends()) {
  describe(`creating and destroying VMs on ${backend.name}`, () => {
    // Each test has its own database, clock and host row: none depends on what another left behind.
    let t: TestApp;
    let clock: ManualClock;
    const host = { host_id: 'host_test', name: 'test', accel: 'tcg', image_id: 'img_test', vcpus_total: 64, memory_mib_total: 64 * 1024, disk_gib_total: 10_000 };
    beforeEach(async () => {
      clock = new ManualClock();
      t = await createTestApp(backend, { clock });
      await t.services.hosts.register(host);
    });
    afterEach(() => t.close());

    const ledger = (tenantId: string) =>
      t.db.query<{ kind: string; amount_cents: number; vm_id: string | null }>('SELECT kind, amount_cents, vm_id FROM ledger WHERE tenant_id = $1 ORDER BY entry_id', [tenantId]);
    const vmCount = async (tenantId: string) => (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM vms WHERE tenant_id = $1', [tenantId]))[0].n;

    test('with no VM host registered, a create is 503 with Retry-After and charges nothing', async () => {
      await t.db.query('DELETE FROM hosts');
      const tenant = await t.tenant({ card: '4242' });
      const res = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} });
      assert.equal(res.status, 503);
      assert.ok(res.headers.get('retry-after'));
      assert.equal(await vmCount(tenant.tenantId), 0);
      assert.deepEqual(await ledger(tenant.tenantId), []);
    });

    test("a new VM's id is drawn again while its preview label (the id lowercased) is a live VM's or another new one's; the database refuses a second live VM of a label", async () => {
      const tenant = await t.tenant({ card: '4242' });
      const res = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { plan: 'starter', harness: 'echo' } });
      assert.equal(res.status, 201);
      const taken: string = res.body.vm_id;
      const swapCase = (ch: string) => (ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase());
      const sameLabel = `vm_${[...taken.slice(3)].map(swapCase).join('')}`;
      assert.notEqual(sameLabel, taken);
      assert.equal(sameLabel.toLowerCase(), taken.toLowerCase());
      const draws = [sameLabel, 'vm_NewOne000000000000000', 'vm_newone000000000000000', 'vm_Other00000000000000000'];
      assert.deepEqual(await freshVmIds(t.db, 2, () => draws.shift()!), ['vm_NewOne000000000000000', 'vm_Other00000000000000000']);
      const other = await insertVm(t.db, tenant.tenantId);
      await assert.rejects(t.db.query('UPDATE vms SET vm_id = $2 WHERE vm_id = $1', [other, sameLabel]), /duplicate key value violates unique constraint "vms_preview_label"/);
    });

    test('a plan VM is placed on a host, charged once on the card and shown as provisioning', async () => {
      const tenant = await t.tenant({ card: '4242' });
      const res = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { plan: 'pro', cycle: 'annual', harness: 'echo' } });
      assert.equal(res.status, 201);
      assert.deepEqual(Object.keys(res.body).sort(), ['status', 'vm_id']);
      assert.equal(res.body.status, 'provisioning');
      assert.deepEqual(await ledger(tenant.tenantId), [{ kind: 'card_charge', amount_cents: 49000, vm_id: res.body.vm_id }]);
      const [row] = await t.db.query<{ host_id: string; net_slot: number; desired_state: string; image_id: string; vcpus: number }>(
        'SELECT host_id, net_slot, desired_state, image_id, vcpus FROM vms WHERE vm_id = $1',
        [res.body.vm_id],
      );
      assert.deepEqual(row, { host_id: 'host_test', net_slot: row.net_slot, desired_state: 'running', image_id: 'img_test', vcpus: 2 });
      const vm = await t.request('GET', `/v1/api/vms/${res.body.vm_id}`, { key: tenant.key });
      assert.equal(vm.body.status, 'provisioning');
      assert.equal(vm.body.ipv4, null);
      const usage = await t.request('GET', '/v1/api/usage', { key: tenant.key });
      assert.equal(usage.body.mrr.amount_cents, Math.floor(49000 / 12));
    });

    test('bad input, no card, a declined card: the right error, no VM row, no ledger row', async () => {
      const noCard = await t.tenant();
      const declined = await t.tenant({ card: '0002' });
      const ok = await t.tenant({ card: '4242' });
      const cases: [string, unknown, number, string][] = [
        [noCard.key, {}, 402, 'card_required'],
        [declined.key, {}, 402, 'card_declined'],
        [ok.key, { plan: 'gold' }, 400, 'invalid_request'],
        [ok.key, { tier: 'reserved' }, 400, 'invalid_request'],
        [ok.key, { cycle: 'weekly' }, 400, 'invalid_request'],
        [ok.key, { harness: 'nope' }, 400, 'invalid_request'],
        [ok.key, { count: 2 }, 400, 'invalid_request'],
        [ok.key, { count: 0, tier: 'spot' }, 400, 'invalid_request'],
        [ok.key, { plan: 'starter', tier: 'spot' }, 400, 'invalid_request'],
        [ok.key, { colour: 'red' }, 400, 'invalid_request'],
      ];
      for (const [key, body, status, error] of cases) {
        const res = await t.request('POST', '/v1/api/vms', { key, body });
        assert.equal(res.status, status, JSON.stringify(body));
        assert.equal(res.body.error, error, JSON.stringify(body));
      }
      for (const tenant of [noCard, declined, ok]) {
        assert.equal(await vmCount(tenant.tenantId), 0);
        assert.deepEqual(await ledger(tenant.tenantId), []);
      }
    });

    test('20 concurrent identical creates with one Idempotency-Key make one VM and one charge', async () => {
      const tenant = await t.tenant({ card: '4242' });
      const headers = { 'idempotency-key': 'create-once-1' };
      const results = await Promise.all(
        Array.from({ length: 20 }, () => t.request('POST', '/v1/api/vms', { key: tenant.key, body: { harness: 'echo' }, headers })),
      );
      for (const r of results) assert.equal(r.status, 201, r.text);
      const ids = new Set(results.map((r) => r.body.vm_id));
      assert.equal(ids.size, 1);
      assert.equal(results.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 19);
      assert.equal(await vmCount(tenant.tenantId), 1);
      assert.equal((await ledger(tenant.tenantId)).length, 1);
      const other = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { harness: 'aider' }, headers });
      assert.equal(other.status, 409);
      assert.equal(other.body.error, 'idempotency_conflict');
      const bad = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {}, headers: { 'idempotency-key': 'x'.repeat(256) } });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /^Idempotency-Key: /);
      assert.equal(await vmCount(tenant.tenantId), 1);
    });

    test('a failed first attempt is not replayed: the same key works once a card is on file', async () => {
      const tenant = await t.tenant();
      const headers = { 'idempotency-key': 'retry-after-card' };
      const first = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {}, headers });
      assert.equal(first.status, 402);
      await t.admin('PUT', `/v1/admin/tenants/${tenant.tenantId}/card`, { brand: 'visa', last4: '4242' });
      const second = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {}, headers });
      assert.equal(second.status, 201);
      assert.equal((await ledger(tenant.tenantId)).length, 1);
    });

    test('a spot swarm needs an hour of credits per VM, draws nothing up front, and gets vm_ids', async () => {
      const tenant = await t.tenant({ credits: 11 });
      const short = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { tier: 'spot', count: 3 } });
      assert.equal(short.status, 402);
      assert.equal(short.body.error, 'insufficient_credits');
      await t.admin('POST', `/v1/admin/tenants/${tenant.tenantId}/credits`, { amount_cents: 1 });
      const res = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { tier: 'spot', count: 3 } });
      assert.equal(res.status, 201);
      assert.equal(res.body.tier, 'spot');
      assert.equal(res.body.vm_ids.length, 3);
      assert.equal(res.body.vm_ids[0], res.body.vm_id);
      const slots = await t.db.query<{ net_slot: number }>('SELECT net_slot FROM vms WHERE vm_id = ANY($1::text[])', [res.body.vm_ids]);
      assert.equal(new Set(slots.map((s) => s.net_slot)).size, 3);
      assert.equal((await t.request('GET', '/v1/api/billing', { key: tenant.key })).body.credits_cents, 12);
    });

    test('a full host preempts spot VMs for a plan VM, and refuses a spot VM', async () => {
      await t.services.hosts.register({ ...host, memory_mib_total: 0, vcpus_total: 0 }); // full, whatever runs there
      await t.services.hosts.register({ ...host, host_id: 'host_small', vcpus_total: 2, memory_mib_total: 2048 });
      const spotTenant = await t.tenant({ credits: 100 });
      const spots = await t.request('POST', '/v1/api/vms', { key: spotTenant.key, body: { tier: 'spot', count: 2 } });
      assert.equal(spots.status, 201);
      const more = await t.request('POST', '/v1/api/vms', { key: spotTenant.key, body: { tier: 'spot' } });
      assert.equal(more.status, 503);
      const planTenant = await t.tenant({ card: '4242' });
      const plan = await t.request('POST', '/v1/api/vms', { key: planTenant.key, body: {} });
      assert.equal(plan.status, 201);
      const preempted = await t.db.query<{ status: string; status_reason: string; desired_state: string }>(
        `SELECT status, status_reason, desired_state FROM vms WHERE vm_id = ANY($1::text[]) AND status_reason = 'preempted'`,
        [spots.body.vm_ids],
      );
      assert.deepEqual(preempted, [{ status: 'stopping', status_reason: 'preempted', desired_state: 'stopped' }]);
    });

    test('a suspended VM holds disk, not memory or CPU: its host takes another VM; suspend of a VM not running is 409', async () => {
      await t.services.hosts.register({ ...host, memory_mib_total: 0, vcpus_total: 0 }); // full
      // One starter VM's CPU and memory; disk for two and one saved memory (10 + 10 + 1 GiB).
      await t.services.hosts.register({ ...host, host_id: 'host_one', vcpus_total: 1, memory_mib_total: 1024, disk_gib_total: 21 });
      const tenant = await t.tenant({ card: '4242' });
      const first = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} });
      assert.equal(first.status, 201);
      assert.equal((await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} })).status, 503);
      const refused = await t.request('POST', `/v1/api/vms/${first.body.vm_id}/suspend`, { key: tenant.key });
      assert.equal(refused.status, 409);
      assert.equal(refused.body.error, 'vm_not_running');
      assert.equal((await t.request('GET', `/v1/api/vms/${first.body.vm_id}`, { key: tenant.key })).body.status, 'provisioning');
      await t.db.query(`UPDATE vms SET status = 'running' WHERE vm_id = $1`, [first.body.vm_id]);
      const suspending = await t.request('POST', `/v1/api/vms/${first.body.vm_id}/suspend`, { key: tenant.key });
      assert.equal(suspending.status, 200);
      assert.equal(suspending.body.status, 'suspending');
      const second = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} });
      assert.equal(second.status, 201, JSON.stringify(second.body));
      assert.equal((await t.db.query<{ host_id: string }>('SELECT host_id FROM vms WHERE vm_id = $1', [second.body.vm_id]))[0].host_id, 'host_one');
      // Its saved memory counts on the disk: no room for a third VM's disk.
      await t.db.query(`UPDATE vms SET status = 'running' WHERE vm_id = $1`, [second.body.vm_id]);
      assert.equal((await t.request('POST', `/v1/api/vms/${second.body.vm_id}/stop`, { key: tenant.key })).status, 200);
      assert.equal((await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} })).status, 503);
    });

    test('a tier VM draws credits for its running time; at zero credits its tenant\'s tier VMs stop; destroy draws the last part-cent', async () => {
      const tenant = await t.tenant({ credits: 24 });
      const a = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { tier: 'ondemand' } });
      const b = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: { tier: 'ondemand' } });
      // The host booted them at the same moment (what the reconciler records).
      await t.db.query(`UPDATE vms SET status = 'running', metered_until = $2 WHERE vm_id = ANY($1::text[])`, [[a.body.vm_id, b.body.vm_id], clock.now()]);
      const meter = (vmId: string) =>
        t.db.transaction(async (tx) => {
          const [vm] = await tx.query<any>('SELECT * FROM vms WHERE vm_id = $1 FOR UPDATE', [vmId]);
          return meterVm(tx, t.services.billing, vm, clock.now(), { running: true });
        });
      clock.t += 30 * 60_000 + 59_000; // 30 min 59 s: 6 cents and 59 s carried
      assert.deepEqual(await meter(a.body.vm_id), { drawn: 6, exhausted: false });
      assert.equal((await t.request('GET', '/v1/api/billing', { key: tenant.key })).body.credits_cents, 18);
      const [carried] = await t.db.query<{ unbilled_ms: number }>('SELECT unbilled_ms FROM vms WHERE vm_id = $1', [a.body.vm_id]);
      assert.equal(carried.unbilled_ms, 59_000);

      const destroyed = await t.request('DELETE', `/v1/api/vms/${a.body.vm_id}`, { key: tenant.key });
      assert.equal(destroyed.status, 200);
      assert.equal(destroyed.body.status, 'deleted');
      assert.equal((await t.request('GET', `/v1/api/vms/${a.body.vm_id}`, { key: tenant.key })).status, 404);
      assert.equal((await t.request('DELETE', `/v1/api/vms/${a.body.vm_id}`, { key: tenant.key })).status, 404);
      assert.equal((await t.request('POST', `/v1/api/vms/${a.body.vm_id}/start`, { key: tenant.key })).status, 404);
      assert.equal((await t.request('GET', '/v1/api/billing', { key: tenant.key })).body.credits_cents, 17); // 59 s → 1 cent, rounded up

      clock.t += 3 * 3_600_000; // b has run 3.5 h: 42 cents wanted, 17 left
      assert.deepEqual(await meter(b.body.vm_id), { drawn: 17, exhausted: true });
      assert.equal((await t.request('GET', '/v1/api/billing', { key: tenant.key })).body.credits_cents, 0);
      const draws = await ledger(tenant.tenantId);
      assert.deepEqual(draws.filter((d) => d.kind === 'credit_draw').map((d) => d.amount_cents), [6, 1, 17]);
    });

    test('a read key cannot create or destroy; another tenant\'s VM is 404 to destroy', async () => {
      const owner = await t.tenant({ card: '4242' });
      const other = await t.tenant({ card: '4242' });
      const vm = await t.request('POST', '/v1/api/vms', { key: owner.key, body: {} });
      const read = await t.request('POST', '/v1/api/keys', { key: owner.key, body: { scope: 'read' } });
      assert.equal((await t.request('POST', '/v1/api/vms', { key: read.body.key, body: {} })).status, 403);
      assert.equal((await t.request('DELETE', `/v1/api/vms/${vm.body.vm_id}`, { key: read.body.key })).status, 403);
      const foreign = await t.request('DELETE', `/v1/api/vms/${vm.body.vm_id}`, { key: other.key });
      assert.equal(foreign.status, 404);
      assert.equal((await t.request('GET', `/v1/api/vms/${vm.body.vm_id}`, { key: owner.key })).body.status, 'provisioning');
    });
  
    test('templates: fork charges like a create and counts; tenancy and state rules of fork and capture', async () => {
      const owner = await t.tenant({ card: '4242' });
      const other = await t.tenant({ card: '4242' });
      const fork = await t.request('POST', '/v1/api/templates/echo-workspace/fork', { key: owner.key, body: {}, headers: { 'idempotency-key': 'fork-1' } });
      assert.equal(fork.status, 201, fork.text);
      assert.deepEqual(fork.body, { vm_id: fork.body.vm_id, status: 'provisioning', tier: null, template_id: 'tpl_starterecho00000000000' });
      const again = await t.request('POST', '/v1/api/templates/echo-workspace/fork', { key: owner.key, body: {}, headers: { 'idempotency-key': 'fork-1' } });
      assert.equal(again.body.vm_id, fork.body.vm_id);
      assert.deepEqual(await ledger(owner.tenantId), [{ kind: 'card_charge', amount_cents: 1900, vm_id: fork.body.vm_id }]);
      const vm = await t.request('GET', `/v1/api/vms/${fork.body.vm_id}`, { key: owner.key });
      assert.equal(vm.body.template_id, 'tpl_starterecho00000000000');
      assert.equal(vm.body.harness, 'echo');
      assert.equal((await t.request('GET', '/v1/api/templates/echo-workspace', { key: other.key })).body.forks, 1);

      // A private template of another tenant: 404 by id and by slug, for get and fork.
      await t.db.query(
        `INSERT INTO templates (template_id, tenant_id, slug, name, harness, visibility, status) VALUES ('tpl_ownersprivate000000000', $1, 'owners-lab', 'Lab', 'echo', 'private', 'ready')`,
        [owner.tenantId],
      );
      for (const ref of ['tpl_ownersprivate000000000', 'owners-lab']) {
        assert.equal((await t.request('GET', `/v1/api/templates/${ref}`, { key: other.key })).status, 404);
        assert.equal((await t.request('POST', `/v1/api/templates/${ref}/fork`, { key: other.key, body: {} })).status, 404);
      }
      assert.equal((await ledger(other.tenantId)).length, 0);
      const noCard = await t.tenant();
      assert.equal((await t.request('POST', '/v1/api/templates/echo-workspace/fork', { key: noCard.key, body: {} })).body.error, 'card_required');

      // Capture: another tenant's VM is 404; a provisioning VM is 409; a read key is 403; no row is left.
      assert.equal((await t.request('POST', `/v1/api/vms/${fork.body.vm_id}/capture`, { key: other.key, body: {} })).status, 404);
      const provisioning = await t.request('POST', `/v1/api/vms/${fork.body.vm_id}/capture`, { key: owner.key, body: {} });
      assert.equal(provisioning.status, 409);
      assert.match(provisioning.body.message, /provisioning/);
      const read = await t.request('POST', '/v1/api/keys', { key: owner.key, body: { scope: 'read' } });
      assert.equal((await t.request('POST', `/v1/api/vms/${fork.body.vm_id}/capture`, { key: read.body.key, body: {} })).status, 403);
      const rows = await t.db.query('SELECT 1 FROM templates WHERE source_vm_id = $1', [fork.body.vm_id]);
      assert.equal(rows.length, 0);
    });
  });
}
