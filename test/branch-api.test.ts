/**
 * Branching and snapshots over the API without VMs (decisions section 18): bad input gets the Error
 * shape and changes nothing (no snapshot, no VM, no charge); snapshots of another tenant are 404; a
 * snapshot a VM is starting from is 409 on delete; listing, getting and limits count kept snapshots.
 * The branch itself, on real microVMs, is test/branch.test.ts.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, insertVm, type TestApp } from './helpers.ts';
import { randomBase62 } from '../src/domain/ids.ts';
import { requireStillWithin } from '../src/domain/limits.ts';
import { LocalSnapshots, UNCLAIMED_MS } from '../src/host/branching.ts';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { DomainError } from '../src/domain/errors.ts';

for (const backend of backends()) {
  describe(`branching and snapshots, bad input (${backend.name})`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp(backend);
    });
    after(() => t.close());

    const counts = async (tenantId: string) => {
      const [row] = await t.db.query<{ vms: number; snaps: number; ledger: number }>(
        `SELECT (SELECT count(*)::int FROM vms WHERE tenant_id = $1) AS vms,
                (SELECT count(*)::int FROM snapshots WHERE tenant_id = $1) AS snaps,
                (SELECT count(*)::int FROM ledger WHERE tenant_id = $1) AS ledger`,
        [tenantId],
      );
      return row;
    };

    const insertSnapshot = async (tenantId: string, vmId: string, fields: { status?: string; kind?: string; size?: number; ageS?: number } = {}) => {
      const id = `snap_${randomBase62(22)}`;
      await t.db.query(
        `INSERT INTO snapshots (snapshot_id, tenant_id, vm_id, host_id, name, kind, status, size_bytes, vcpus, memory_mib, disk_gib, harness, egress, created_at)
         VALUES ($1, $2, $3, 'host_x', 'before the refactor', $4, $5, $6, 1, 1024, 10, 'echo', '{"mode":"allowlist","allow":[]}', now() - make_interval(secs => $7))`,
        [id, tenantId, vmId, fields.kind ?? 'snapshot', fields.status ?? 'ready', fields.size ?? 3 * 1024 ** 3, fields.ageS ?? 0],
      );
      return id;
    };

    test('a snapshot still being made an hour after it began (its taker gone for good) fails with the reason; a younger one and a kept one stay', async () => {
      const { tenantId } = await t.tenant({ card: '4242' });
      const vmId = await insertVm(t.db, tenantId, { status: 'running' });
      const old = await insertSnapshot(tenantId, vmId, { status: 'creating', ageS: 2 * 3600 });
      const young = await insertSnapshot(tenantId, vmId, { status: 'creating', ageS: 10 * 60 });
      const kept = await insertSnapshot(tenantId, vmId, { status: 'ready', ageS: 5 * 3600 });
      assert.equal(await t.services.snapshots.failAbandoned(), 1);
      const rows = await t.db.query<{ snapshot_id: string; status: string; status_reason: string | null }>(
        `SELECT snapshot_id, status, status_reason FROM snapshots WHERE snapshot_id = ANY($1)`,
        [[old, young, kept]],
      );
      const by = new Map(rows.map((r) => [r.snapshot_id, r]));
      assert.equal(by.get(old)?.status, 'failed');
      assert.match(by.get(old)?.status_reason ?? '', /an hour after it began/);
      assert.equal(by.get(young)?.status, 'creating');
      assert.equal(by.get(kept)?.status, 'ready');
      assert.equal(await t.services.snapshots.failAbandoned(), 0, 'once');
    });

    test('a count out of range, a plan with count > 1 and a plan of another size are 400 naming the field; nothing is made', async () => {
      const { tenantId, key } = await t.tenant({ card: '4242', credits: 10_000 });
      const vmId = await insertVm(t.db, tenantId, { status: 'running' });
      const before = await counts(tenantId);
      for (const [body, field] of [
        [{ count: 0 }, 'count'],
        [{ count: 21 }, 'count'],
        [{ count: 'two' }, 'count'],
        [{ count: 3, plan: 'starter' }, 'count'],
        [{ count: 3 }, 'count'],
        [{ plan: 'pro' }, 'plan'],
        [{ plan: 'starter', tier: 'spot' }, 'tier'],
        [{ colour: 'blue' }, 'colour'],
      ] as const) {
        const res = await t.request('POST', `/v1/api/vms/${vmId}/branch`, { key, body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'invalid_request');
        assert.match(res.body.message, new RegExp(`^${field}`), res.body.message);
      }
      const start = await t.request('POST', `/v1/api/snapshots/${await insertSnapshot(tenantId, vmId)}/vms`, { key, body: { count: 21 } });
      assert.equal(start.status, 400);
      const after = await counts(tenantId);
      assert.equal(after.vms, before.vms);
      assert.equal(after.ledger, before.ledger);
    });

    test('a VM that is not running: 409 vm_not_running for a branch and a snapshot, nothing made', async () => {
      const { tenantId, key } = await t.tenant({ card: '4242', credits: 10_000 });
      for (const status of ['stopped', 'provisioning', 'suspended']) {
        const vmId = await insertVm(t.db, tenantId, { status });
        const before = await counts(tenantId);
        const branch = await t.request('POST', `/v1/api/vms/${vmId}/branch`, { key, body: {} });
        assert.equal(branch.status, 409, status);
        assert.equal(branch.body.error, 'vm_not_running');
        const snap = await t.request('POST', `/v1/api/vms/${vmId}/snapshots`, { key, body: { name: 'x' } });
        assert.equal(snap.status, 409, status);
        assert.equal(snap.body.error, 'vm_not_running');
        assert.deepEqual(await counts(tenantId), before);
      }
    });

    test('not enough credits for every VM of a branch: 402 and none is made, the VM is never paused', async () => {
      // Three spot VMs need three hours at 4 cents: 12 cents; 10 is one short of enough.
      const { tenantId, key } = await t.tenant({ credits: 10 });
      const vmId = await insertVm(t.db, tenantId, { tier: 'spot', status: 'running' });
      const before = await counts(tenantId);
      const res = await t.request('POST', `/v1/api/vms/${vmId}/branch`, { key, body: { count: 3, tier: 'spot' }, headers: { 'idempotency-key': 'branch-1' } });
      assert.equal(res.status, 402);
      assert.equal(res.body.error, 'insufficient_credits');
      assert.deepEqual(await counts(tenantId), before);
      // A plan VM's branch without a card on file.
      const planVm = await insertVm(t.db, tenantId, { status: 'running' });
      const card = await t.request('POST', `/v1/api/vms/${planVm}/branch`, { key, body: {} });
      assert.equal(card.status, 402);
      assert.equal(card.body.error, 'card_required');
    });

    test('with no VM host attached, a branch that would be accepted is 503 and nothing is made', async () => {
      const { tenantId, key } = await t.tenant({ credits: 1000 });
      const vmId = await insertVm(t.db, tenantId, { tier: 'spot', status: 'running' });
      const before = await counts(tenantId);
      const res = await t.request('POST', `/v1/api/vms/${vmId}/branch`, { key, body: { count: 2 } });
      assert.equal(res.status, 503);
      assert.equal(res.body.error, 'unavailable');
      assert.deepEqual(await counts(tenantId), before);
    });

    test("another tenant's VM or snapshot is 404 everywhere; a read key is 403", async () => {
      const a = await t.tenant({ card: '4242', credits: 1000 });
      const b = await t.tenant({ card: '4242', credits: 1000 });
      const vmId = await insertVm(t.db, a.tenantId, { status: 'running' });
      const snapId = await insertSnapshot(a.tenantId, vmId);
      for (const [method, path, body] of [
        ['POST', `/v1/api/vms/${vmId}/branch`, {}],
        ['POST', `/v1/api/vms/${vmId}/snapshots`, {}],
        ['GET', `/v1/api/snapshots/${snapId}`, undefined],
        ['DELETE', `/v1/api/snapshots/${snapId}`, undefined],
        ['POST', `/v1/api/snapshots/${snapId}/vms`, {}],
        ['GET', `/v1/api/snapshots/snap_${randomBase62(22)}`, undefined],
      ] as const) {
        const res = await t.request(method, path, { key: b.key, body });
        assert.equal(res.status, 404, `${method} ${path}`);
        assert.equal(res.body.error, 'not_found');
      }
      const list = await t.request('GET', '/v1/api/snapshots', { key: b.key });
      assert.deepEqual(list.body, { data: [], has_more: false });
      const readKey = (await t.request('POST', '/v1/api/keys', { key: a.key, body: { scope: 'read' } })).body.key;
      const ro = await t.request('POST', `/v1/api/vms/${vmId}/branch`, { key: readKey, body: {} });
      assert.equal(ro.status, 403);
      assert.equal((await t.request('DELETE', `/v1/api/snapshots/${snapId}`, { key: readKey })).status, 403);
      assert.equal((await t.request('GET', `/v1/api/snapshots/${snapId}`, { key: readKey })).status, 200);
    });

    test("a snapshot's own size counts in disk_gib once it is known: over the limit it is refused", async () => {
      const { tenantId } = await t.tenant({ card: '4242' });
      const vmId = await insertVm(t.db, tenantId, { status: 'running' });
      await insertSnapshot(tenantId, vmId, { size: 3 * 1024 ** 3 });
      const within = (limit: number) =>
        t.db.transaction(async (tx) => {
          await tx.query(`INSERT INTO tenant_limits (tenant_id, name, value, updated_at) VALUES ($1, 'disk_gib', $2, now()) ON CONFLICT (tenant_id, name) DO UPDATE SET value = $2`, [tenantId, limit]);
          await requireStillWithin(tx, tenantId, 'disk_gib', 3, new Date());
        });
      // The VM's 10 GiB disk and the snapshot's 3 GiB.
      await within(13);
      await assert.rejects(within(12), (e: DomainError) => e.code === 'quota_exceeded' && /limit disk_gib is 12 and the current count is 10: this request would add 3/.test(e.message));
    });

    test("a host removes the directory of a VM made from a snapshot whose row never came, once it is old; nothing else", async () => {
      const { tenantId } = await t.tenant({ card: '4242' });
      const vmsDir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-unclaimed-'));
      try {
        const withRow = await insertVm(t.db, tenantId, { status: 'starting' });
        const ids = { orphan: `vm_${randomBase62(22)}`, withRow, fresh: `vm_${randomBase62(22)}`, other: `vm_${randomBase62(22)}` };
        for (const [name, id] of Object.entries(ids)) {
          const dir = path.join(vmsDir, id);
          await mkdir(dir);
          // A directory prepareFromSnapshot made holds a saved memory marked as the snapshot's; `other` holds a VM's own.
          const record = { format: 1, sha256: '', bytes: 4096, ...(name === 'other' ? {} : { branch: { snapshot_id: 'snap_x', runs: [] } }) };
          await writeFile(path.join(dir, 'suspend.json'), JSON.stringify(record));
          if (name !== 'fresh') await utimes(dir, new Date(Date.now() - UNCLAIMED_MS - 60_000), new Date(Date.now() - UNCLAIMED_MS - 60_000));
        }
        const log = { info: () => undefined, warn: () => undefined };
        const driver = { vmDir: (id: string) => path.join(vmsDir, id), listVmDirs: async () => Object.values(ids), snapshotMachine: () => null };
        const host = new LocalSnapshots({ db: t.db, credentials: { sealedFor: async () => ({}) }, hostId: 'host_x', dir: path.join(vmsDir, 'snaps'), driver, log });
        assert.equal(await host.sweepUnclaimed(), 1);
        assert.deepEqual((await readdir(vmsDir)).sort(), [ids.withRow, ids.fresh, ids.other].sort());
      } finally {
        await rm(vmsDir, { recursive: true, force: true });
      }
    });

    test('list, get and limits show kept snapshots only; a snapshot a VM is starting from is 409 on delete, then deleted once it runs', async () => {
      const { tenantId, key } = await t.tenant({ card: '4242' });
      const vmId = await insertVm(t.db, tenantId, { status: 'running' });
      const first = await insertSnapshot(tenantId, vmId, { size: 2 * 1024 ** 3 });
      const second = await insertSnapshot(tenantId, vmId, { size: 1024 });
      await insertSnapshot(tenantId, vmId, { status: 'failed' });
      const page = await t.request('GET', '/v1/api/snapshots?limit=1', { key });
      assert.equal(page.status, 200);
      assert.equal(page.body.data.length, 1);
      assert.equal(page.body.has_more, true);
      const rest = await t.request('GET', `/v1/api/snapshots?after=${page.body.data[0].snapshot_id}`, { key });
      assert.deepEqual([...page.body.data, ...rest.body.data].map((s: { snapshot_id: string }) => s.snapshot_id).sort(), [first, second].sort());
      assert.equal(rest.body.has_more, false);
      // One VM's: with the cursor too, and none for a VM with none.
      const otherVm = await insertVm(t.db, tenantId, { status: 'running' });
      const third = await insertSnapshot(tenantId, otherVm, { size: 1024 });
      const ofVm = await t.request('GET', `/v1/api/snapshots?vm_id=${vmId}&limit=1`, { key });
      const ofVmRest = await t.request('GET', `/v1/api/snapshots?vm_id=${vmId}&after=${ofVm.body.data[0].snapshot_id}`, { key });
      assert.deepEqual([...ofVm.body.data, ...ofVmRest.body.data].map((s: { snapshot_id: string }) => s.snapshot_id).sort(), [first, second].sort());
      assert.deepEqual((await t.request('GET', `/v1/api/snapshots?vm_id=${otherVm}`, { key })).body.data.map((s: { snapshot_id: string }) => s.snapshot_id), [third]);
      assert.deepEqual((await t.request('GET', '/v1/api/snapshots?vm_id=vm_none', { key })).body, { data: [], has_more: false });
      await t.request('DELETE', `/v1/api/snapshots/${third}`, { key });
      await t.db.query('UPDATE vms SET deleted_at = now() WHERE vm_id = $1', [otherVm]);
      const got = await t.request('GET', `/v1/api/snapshots/${first}`, { key });
      assert.deepEqual(Object.keys(got.body).sort(), ['created_at', 'name', 'size_bytes', 'snapshot_id', 'vm_id']);
      assert.equal(got.body.size_bytes, 2 * 1024 ** 3);
      const limits = (await t.request('GET', '/v1/api/limits', { key })).body;
      // One being taken is not listed (it counts in the limit: two taken at once cannot both pass it).
      await insertSnapshot(tenantId, vmId, { status: 'creating' });
      assert.equal((await t.request('GET', '/v1/api/snapshots', { key })).body.data.length, 2);
      assert.equal(limits.usage.snapshots, 2);
      // The VM's 10 GiB disk and the kept snapshots' 2 GiB and 1 KiB (each rounded up together).
      assert.equal(limits.usage.disk_gib, 10 + 3);

      const starting = await insertVm(t.db, tenantId, { status: 'provisioning' });
      await t.db.query('UPDATE vms SET snapshot_id = $2 WHERE vm_id = $1', [starting, first]);
      const busy = await t.request('DELETE', `/v1/api/snapshots/${first}`, { key });
      assert.equal(busy.status, 409);
      assert.equal(busy.body.error, 'conflict');
      assert.match(busy.body.message, /starting from it/);
      assert.equal((await t.request('GET', `/v1/api/snapshots/${first}`, { key })).status, 200);
      // It resumed (a resume sets running_since, not booted_at), and was stopped since: not starting from it.
      await t.db.query(`UPDATE vms SET status = 'stopped', running_since = now() - interval '1 minute' WHERE vm_id = $1`, [starting]);
      const gone = await t.request('DELETE', `/v1/api/snapshots/${first}`, { key });
      assert.equal(gone.status, 200);
      assert.equal(gone.body.snapshot_id, first);
      assert.equal((await t.request('GET', `/v1/api/snapshots/${first}`, { key })).status, 404);
      assert.equal((await t.request('GET', '/v1/api/limits', { key })).body.usage.snapshots, 2);
    });
  });
}
