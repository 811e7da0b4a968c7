import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, insertVm, type TestApp } from './helpers.ts';
import { LedgerPaymentProvider } from '../src/domain/payments.ts';
import { ERROR_STATUS } from '../src/http/errors.ts';

for (const backend of backends()) {
  describe(`billing, credits, ledger and usage on ${backend.name}`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp(backend);
    });
    after(() => t.close());

    test('billing shows the card and credits the operator set', async () => {
      const tenant = await t.tenant();
      const empty = await t.request('GET', '/v1/api/billing', { key: tenant.key });
      assert.deepEqual(empty.body, { card_on_file: false, brand: null, last4: null, credits_cents: 0 });
      const set = await t.admin('PUT', `/v1/admin/tenants/${tenant.tenantId}/card`, { brand: 'visa', last4: '4242' });
      assert.deepEqual(set.body, { card_on_file: true, brand: 'visa', last4: '4242', credits_cents: 0 });
      const credits = await t.admin('POST', `/v1/admin/tenants/${tenant.tenantId}/credits`, { amount_cents: 5000 });
      assert.deepEqual(credits.body, { balance_cents: 5000 });
      await t.admin('POST', `/v1/admin/tenants/${tenant.tenantId}/credits`, { amount_cents: 250 });
      const billing = await t.request('GET', '/v1/api/billing', { key: tenant.key });
      assert.deepEqual(billing.body, { card_on_file: true, brand: 'visa', last4: '4242', credits_cents: 5250 });
      const removed = await t.admin('DELETE', `/v1/admin/tenants/${tenant.tenantId}/card`);
      assert.equal(removed.body.card_on_file, false);
      assert.equal(removed.body.last4, null);
    });

    test('the operator API refuses bad input and unknown tenants, changing nothing', async () => {
      const tenant = await t.tenant();
      for (const body of [{ brand: 'visa', last4: '42' }, { brand: 'visa', last4: '4242x' }, { brand: 'Visa!', last4: '4242' }, { last4: '4242' }]) {
        const res = await t.admin('PUT', `/v1/admin/tenants/${tenant.tenantId}/card`, body);
        assert.equal(res.status, 400, JSON.stringify(body));
      }
      for (const amount of [0, -5, 1.5, '10']) {
        const res = await t.admin('POST', `/v1/admin/tenants/${tenant.tenantId}/credits`, { amount_cents: amount });
        assert.equal(res.status, 400, String(amount));
        assert.match(res.body.message, /^amount_cents: /);
      }
      assert.equal((await t.admin('POST', '/v1/admin/tenants/ten_nope/credits', { amount_cents: 5 })).status, 404);
      assert.equal((await t.admin('PUT', '/v1/admin/tenants/ten_nope/card', { brand: 'visa', last4: '4242' })).status, 404);
      assert.equal((await t.admin('POST', '/v1/admin/tenants', { email: 'not-an-email' })).status, 400);
      const dup = await t.admin('POST', '/v1/admin/tenants', { email: tenant.email.toUpperCase() });
      assert.equal(dup.status, 409);
      const billing = await t.request('GET', '/v1/api/billing', { key: tenant.key });
      assert.deepEqual(billing.body, { card_on_file: false, brand: null, last4: null, credits_cents: 0 });
    });

    test('a card charge goes through the provider into the ledger; card 0002 is declined and moves no money', async () => {
      const good = await t.tenant({ card: '4242' });
      const declined = await t.tenant({ card: '0002' });
      const none = await t.tenant();
      const ref = await t.db.transaction((tx) => t.services.billing.chargeCard(tx, good.tenantId, 1900, { description: 'starter monthly', plan: 'starter', cycle: 'monthly' }));
      assert.match(ref, /^ch_/);
      await assert.rejects(
        t.db.transaction((tx) => t.services.billing.chargeCard(tx, declined.tenantId, 1900, { description: 'x' })),
        (err: any) => err.code === 'card_declined' && ERROR_STATUS[err.code as keyof typeof ERROR_STATUS] === 402,
      );
      await assert.rejects(
        t.db.transaction((tx) => t.services.billing.chargeCard(tx, none.tenantId, 1900, { description: 'x' })),
        (err: any) => err.code === 'card_required' && ERROR_STATUS[err.code as keyof typeof ERROR_STATUS] === 402,
      );
      const rows = await t.db.query<{ tenant_id: string; kind: string; amount_cents: number }>(
        'SELECT tenant_id, kind, amount_cents FROM ledger WHERE tenant_id = ANY($1)',
        [[good.tenantId, declined.tenantId, none.tenantId]],
      );
      assert.deepEqual(rows, [{ tenant_id: good.tenantId, kind: 'card_charge', amount_cents: 1900 }]);
      assert.deepEqual(await new LedgerPaymentProvider().charge({ card: { brand: 'visa', last4: '0002' } }), { ok: false, message: 'the card was declined' });
    });

    test('the ledger is append-only and credit draws never go below zero', async () => {
      const tenant = await t.tenant({ credits: 100 });
      const drawn = await t.db.transaction((tx) => t.services.billing.drawCredits(tx, tenant.tenantId, 150, { description: 'spot time' }));
      assert.equal(drawn, 100);
      assert.equal(await t.services.billing.creditBalance(t.db, tenant.tenantId), 0);
      await assert.rejects(t.db.query('UPDATE ledger SET amount_cents = 0 WHERE tenant_id = $1', [tenant.tenantId]), /append-only/);
      await assert.rejects(t.db.query('DELETE FROM ledger WHERE tenant_id = $1', [tenant.tenantId]), /append-only/);
      await assert.rejects(
        t.db.transaction((tx) => t.services.billing.requireCredits(tx, tenant.tenantId, 12)),
        (err: any) => err.code === 'insufficient_credits',
      );
    });

    test('create checks money before anything else: card_required, insufficient_credits, then no capacity, charging nothing', async () => {
      const none = await t.tenant();
      const poor = await t.tenant({ credits: 11 });
      const rich = await t.tenant({ card: '4242', credits: 10_000 });
      assert.equal((await t.request('POST', '/v1/api/vms', { key: none.key, body: {} })).body.error, 'card_required');
      assert.equal((await t.request('POST', '/v1/api/vms', { key: poor.key, body: { tier: 'ondemand' } })).body.error, 'insufficient_credits');
      const swarm = await t.request('POST', '/v1/api/vms', { key: poor.key, body: { tier: 'spot', count: 3 } });
      assert.equal(swarm.body.error, 'insufficient_credits');
      assert.match(swarm.body.message, /12 cents/);
      const full = await t.request('POST', '/v1/api/vms', { key: rich.key, body: { plan: 'pro', cycle: 'annual' } });
      assert.equal(full.status, 503);
      assert.ok(full.headers.get('retry-after'));
      const charges = await t.db.query('SELECT 1 FROM ledger WHERE tenant_id = ANY($1) AND kind <> $2', [[none.tenantId, poor.tenantId, rich.tenantId], 'credit_purchase']);
      assert.equal(charges.length, 0);
      assert.equal((await t.db.query('SELECT 1 FROM vms WHERE tenant_id = ANY($1)', [[none.tenantId, poor.tenantId, rich.tenantId]])).length, 0);
    });

    test('usage counts VMs and MRR from real rows: annual is a twelfth rounded down, stopped plan VMs still count', async () => {
      const tenant = await t.tenant({ credits: 1000 });
      const other = await t.tenant();
      await insertVm(t.db, tenant.tenantId, { plan: 'starter', cycle: 'monthly', status: 'running' });
      await insertVm(t.db, tenant.tenantId, { plan: 'pro', cycle: 'annual', status: 'provisioning' });
      await insertVm(t.db, tenant.tenantId, { plan: 'max', cycle: 'annual', status: 'stopped' });
      await insertVm(t.db, tenant.tenantId, { plan: 'max', cycle: 'monthly', status: 'failed' });
      await insertVm(t.db, tenant.tenantId, { plan: 'pro', cycle: 'monthly', status: 'running', deleted: true });
      await insertVm(t.db, tenant.tenantId, { tier: 'spot', status: 'running' });
      await insertVm(t.db, tenant.tenantId, { tier: 'ondemand', status: 'stopped' });
      await insertVm(t.db, other.tenantId, { plan: 'max', cycle: 'monthly', status: 'running' });
      await t.db.transaction((tx) => t.services.billing.drawCredits(tx, tenant.tenantId, 37, { description: 'spot time' }));

      const res = await t.request('GET', '/v1/api/usage', { key: tenant.key });
      assert.equal(res.status, 200);
      const proAnnual = Math.floor(49000 / 12); // 4083
      const maxAnnual = Math.floor(99000 / 12); // 8250
      assert.deepEqual(res.body, {
        vms: {
          live: 3, // running starter, provisioning pro, running spot
          running: 2,
          stopped: 2,
          by_plan: { starter: 1, pro: 1, max: 2 },
          by_tier: { ondemand: 1, spot: 1 },
        },
        mrr: {
          amount_cents: 1900 + proAnnual + maxAnnual + 9900,
          by_plan: { starter: 1900, pro: proAnnual, max: maxAnnual + 9900 },
        },
        credits: { balance_cents: 963, spent_month_cents: 37 },
      });
      const list = await t.request('GET', '/v1/api/vms', { key: tenant.key });
      assert.equal(list.body.total, 6);
      assert.equal(list.body.data.length, 6);
      assert.ok(list.body.data.every((vm: any) => vm.harness_display === 'Echo (diagnostic)'));
    });
  });
}
