/**
 * Egress through the API, without VMs: policies on create, fork and PUT …/egress, the defaults, bad
 * policies and secrets refused without changing anything, the log's paging, tenancy.
 */
import { describe, test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import * as egressStore from '../src/store/egress.ts';

for (const backend of backends()) {
  describe(`egress policies through the API on ${backend.name}`, () => {
    let t: TestApp;
    const host = { host_id: 'host_test', name: 'test', accel: 'tcg', image_id: 'img_test', vcpus_total: 64, memory_mib_total: 64 * 1024, disk_gib_total: 10_000 };
    beforeEach(async () => {
      t = await createTestApp(backend);
      await t.services.hosts.register(host);
    });
    afterEach(() => t.close());

    test("a new VM's default is its harness's provider hosts; create takes a policy and normalises it", async () => {
      const { key } = await t.tenant({ card: '4242' });
      const make = async (body: object) => {
        const res = await t.request('POST', '/v1/api/vms', { key, body });
        assert.equal(res.status, 201, res.text);
        return (await t.request('GET', `/v1/api/vms/${res.body.vm_id}`, { key })).body;
      };
      assert.deepEqual((await make({})).egress, { mode: 'allowlist', allow: ['api.anthropic.com'] });
      assert.deepEqual((await make({ harness: 'codex' })).egress, { mode: 'allowlist', allow: ['api.openai.com'] });
      assert.deepEqual((await make({ harness: 'gemini-cli' })).egress, { mode: 'allowlist', allow: ['generativelanguage.googleapis.com'] });
      assert.deepEqual((await make({ harness: 'echo' })).egress, { mode: 'allowlist', allow: [] });
      const own = await make({ harness: 'echo', egress: { mode: 'allowlist', allow: ['b.example.com', '*.example.org', 'b.example.com'] } });
      assert.deepEqual(own.egress, { mode: 'allowlist', allow: ['*.example.org', 'b.example.com'] });
      assert.deepEqual(own.brokered_secret_names, []);
    });

    test('malformed policies are 400 naming the field, and change nothing', async () => {
      const { key } = await t.tenant({ card: '4242' });
      const vm = (await t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo', egress: { mode: 'public', allow: [] } } })).body;
      const before = (await t.request('GET', `/v1/api/vms/${vm.vm_id}`, { key })).body;
      const bad: Array<[unknown, RegExp]> = [
        [{ mode: 'open', allow: [] }, /^mode: /],
        [{ mode: 'allowlist', allow: ['*'] }, /^egress\.allow\[0\]: .*wildcard alone/],
        [{ mode: 'allowlist', allow: ['ok.example.com', '*.com'] }, /^egress\.allow\[1\]: .*public suffix/],
        [{ mode: 'allowlist', allow: ['*.co.uk'] }, /public suffix/],
        [{ mode: 'allowlist', allow: ['10.0.0.1'] }, /IP address/],
        [{ mode: 'allowlist', allow: ['Example.com'] }, /lowercase/],
        [{ mode: 'allowlist', allow: ['a..example.com'] }, /empty label/],
        [{ mode: 'allowlist', allow: [`${'a'.repeat(64)}.example.com`] }, /invalid label/],
        [{ mode: 'allowlist', allow: [`${'abc.'.repeat(70)}com`] }, /^allow\.0: |longer than 253/],
        [{ mode: 'allowlist', allow: Array.from({ length: 101 }, (_, i) => `h${i}.example.com`) }, /^allow: /],
        [{ mode: 'allowlist' }, /^allow: /],
        [{ mode: 'allowlist', allow: [], extra: 1 }, /extra/],
        [{ mode: 'allowlist', allow: 'x.example.com' }, /^allow: /],
      ];
      for (const [body, why] of bad) {
        const res = await t.request('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { key, body });
        assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
        assert.equal(res.body.error, 'invalid_request');
        assert.match(res.body.message, why, JSON.stringify(body).slice(0, 80));
        const created = await t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo', egress: body } });
        assert.equal(created.status, 400, `create with ${JSON.stringify(body).slice(0, 80)}`);
      }
      assert.deepEqual((await t.request('GET', `/v1/api/vms/${vm.vm_id}`, { key })).body, before);
      assert.equal((await t.request('GET', '/v1/api/vms', { key })).body.total, 1, 'no VM was created by a refused request');
    });

    test('PUT …/egress replaces the policy of a VM whatever its state; another tenant gets 404; a read key 403', async () => {
      const { key } = await t.tenant({ card: '4242' });
      const other = await t.tenant({ card: '4242' });
      const vm = (await t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo' } })).body;
      const put = await t.request('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { key, body: { mode: 'allowlist', allow: ['registry.npmjs.org'] } });
      assert.equal(put.status, 200, put.text);
      assert.deepEqual(put.body.egress, { mode: 'allowlist', allow: ['registry.npmjs.org'] });
      assert.deepEqual((await t.db.query('SELECT egress FROM vms WHERE vm_id = $1', [vm.vm_id]))[0], { egress: { mode: 'allowlist', allow: ['registry.npmjs.org'] } });
      assert.equal((await t.request('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { key: other.key, body: { mode: 'public', allow: [] } })).status, 404);
      assert.equal((await t.request('GET', `/v1/api/vms/${vm.vm_id}/egress/log`, { key: other.key })).status, 404);
      await t.request('POST', `/v1/api/vms/${vm.vm_id}/stop`, { key });
      assert.equal((await t.request('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { key, body: { mode: 'none', allow: [] } })).body.egress.mode, 'none');
      const read = await t.request('POST', '/v1/api/keys', { key, body: { scope: 'read', label: 'r' } });
      assert.equal((await t.request('PUT', `/v1/api/vms/${vm.vm_id}/egress`, { key: read.body.key, body: { mode: 'public', allow: [] } })).status, 403);
    });

    test('the log: newest first, limit 1–200 (default 50), has_more; never more than the VM it belongs to', async () => {
      const { key } = await t.tenant({ card: '4242' });
      const vm = (await t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo' } })).body;
      const otherVm = (await t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo' } })).body;
      const t0 = Date.parse('2026-11-01T00:00:00Z');
      for (let i = 0; i < 60; i++) {
        const id = await egressStore.logConnection(t.db, vm.vm_id, { at: new Date(t0 + i * 1000), host: `h${i}.example.com`, port: 443, decision: i % 2 ? 'allowed' : 'denied', reason: 'test' });
        if (i % 2) await egressStore.logBytes(t.db, id, i, 2 * i);
      }
      await egressStore.logConnection(t.db, otherVm.vm_id, { at: new Date(t0), host: 'other.example.com', port: 80, decision: 'denied', reason: 'x' });
      const page = await t.request('GET', `/v1/api/vms/${vm.vm_id}/egress/log`, { key });
      assert.equal(page.status, 200, page.text);
      assert.equal(page.body.data.length, 50);
      assert.equal(page.body.has_more, true);
      assert.deepEqual(page.body.data[0], { at: new Date(t0 + 59_000).toISOString(), host: 'h59.example.com', port: 443, decision: 'allowed', reason: 'test', bytes_out: 59, bytes_in: 118 });
      const all = await t.request('GET', `/v1/api/vms/${vm.vm_id}/egress/log?limit=200`, { key });
      assert.equal(all.body.data.length, 60);
      assert.equal(all.body.has_more, false);
      assert.ok(all.body.data.every((e: { host: string }) => e.host !== 'other.example.com'));
      for (const limit of ['0', '201', 'x', '1.5']) assert.equal((await t.request('GET', `/v1/api/vms/${vm.vm_id}/egress/log?limit=${limit}`, { key })).status, 400, limit);
      assert.equal((await egressStore.pruneLog(t.db, new Date(t0 + 30_000))), 31);
      assert.equal((await t.request('GET', `/v1/api/vms/${vm.vm_id}/egress/log?limit=200`, { key })).body.data.length, 30);
    });

    test('secrets whose names or values could inject into a header are 400', async () => {
      const { key } = await t.tenant({ card: '4242' });
      const vm = (await t.request('POST', '/v1/api/vms', { key, body: { harness: 'claude-code' } })).body;
      for (const body of [{ ANTHROPIC_API_KEY: 'sk\r\nx-evil: 1' }, { ANTHROPIC_API_KEY: 'a\nb' }, { A: 'nul\u0000' }, { 'BAD NAME': 'x' }, { 'X-Header:': 'x' }]) {
        const res = await t.request('PUT', `/v1/api/vms/${vm.vm_id}/secrets`, { key, body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'invalid_request');
      }
    });

    test('fork takes a policy, and defaults to the harness of the template', async () => {
      const { key, tenantId } = await t.tenant({ card: '4242' });
      await t.db.query(
        `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, visibility, status, created_at, plan)
         VALUES ('tpl_egress', $1, 'egress-tpl', 'egress tpl', '', 'codex', 'private', 'ready', now(), 'starter')`,
        [tenantId],
      );
      const dflt = await t.request('POST', '/v1/api/templates/tpl_egress/fork', { key, body: {} });
      assert.equal(dflt.status, 201, dflt.text);
      assert.deepEqual((await t.request('GET', `/v1/api/vms/${dflt.body.vm_id}`, { key })).body.egress, { mode: 'allowlist', allow: ['api.openai.com'] });
      const own = await t.request('POST', '/v1/api/templates/tpl_egress/fork', { key, body: { egress: { mode: 'public', allow: [] } } });
      assert.deepEqual((await t.request('GET', `/v1/api/vms/${own.body.vm_id}`, { key })).body.egress, { mode: 'public', allow: [] });
      const bad = await t.request('POST', '/v1/api/templates/tpl_egress/fork', { key, body: { egress: { mode: 'allowlist', allow: ['*.com'] } } });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /^egress\.allow\[0\]/);
    });
  });
}
