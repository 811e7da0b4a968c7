/**
 * GET /v1/api/vms/{id}/wait against the database: a wait answers when the VM's host writes the status
 * waited for and publishes it (as the reconciler does after each transition), when the VM rests where
 * nothing leads on, or when its time is up. No QEMU here: the host's writes are made with SQL, as
 * they are committed; vm-real.test.ts waits on real VMs.
 */
import { describe, test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import { waitIsOver } from '../src/domain/vms.ts';

describe('when a wait is over', () => {
  test('the status waited for, failed, or a resting status while nothing asked leads to the target', () => {
    assert.ok(waitIsOver({ status: 'running', desired_state: 'running' }, 'running'));
    assert.ok(waitIsOver({ status: 'failed', desired_state: 'running' }, 'running'));
    assert.ok(!waitIsOver({ status: 'provisioning', desired_state: 'running' }, 'running'));
    assert.ok(!waitIsOver({ status: 'suspending', desired_state: 'suspended' }, 'suspended'));
    // A suspend that failed: the VM runs on and wants to run.
    assert.ok(waitIsOver({ status: 'running', desired_state: 'running' }, 'suspended'));
    // A stop asked for while a start was waited on: the stopping VM is on its way, the stopped one rests.
    assert.ok(!waitIsOver({ status: 'stopping', desired_state: 'stopped' }, 'running'));
    assert.ok(waitIsOver({ status: 'stopped', desired_state: 'stopped' }, 'running'));
    // A stopped VM asked to start is on its way to running, not resting for the wait.
    assert.ok(!waitIsOver({ status: 'stopped', desired_state: 'running' }, 'running'));
  });
});

for (const backend of backends()) {
  describe(`waiting for a VM's status on ${backend.name}`, () => {
    let t: TestApp;
    const host = { host_id: 'host_test', name: 'test', accel: 'tcg', image_id: 'img_test', vcpus_total: 64, memory_mib_total: 64 * 1024, disk_gib_total: 10_000 };
    beforeEach(async () => {
      t = await createTestApp(backend);
      await t.services.hosts.register(host);
    });
    afterEach(() => t.close());

    const newVm = async () => {
      const tenant = await t.tenant({ card: '4242' });
      const res = await t.request('POST', '/v1/api/vms', { key: tenant.key, body: {} });
      assert.equal(res.status, 201);
      return { key: tenant.key, vmId: res.body.vm_id as string };
    };
    /** What a VM's host does: write the status, then publish it once committed. */
    const hostWrites = async (vmId: string, status: string, publish = true) => {
      await t.db.query('UPDATE vms SET status = $2 WHERE vm_id = $1', [vmId, status]);
      if (publish) await t.services.vmFeed.publish({ vm_id: vmId });
    };

    test('a wait for running answers the VM once its host writes running', async () => {
      const { key, vmId } = await newVm();
      const waiting = t.request('GET', `/v1/api/vms/${vmId}/wait?status=running&timeout_s=60`, { key });
      await new Promise((r) => setTimeout(r, 50));
      await hostWrites(vmId, 'running');
      const res = await waiting;
      assert.equal(res.status, 200);
      assert.equal(res.body.vm_id, vmId);
      assert.equal(res.body.status, 'running');
    });

    test('a change nobody published is still seen: the wait looks again every second', async () => {
      const { key, vmId } = await newVm();
      const waiting = t.request('GET', `/v1/api/vms/${vmId}/wait?timeout_s=60`, { key });
      await new Promise((r) => setTimeout(r, 50));
      await hostWrites(vmId, 'running', false);
      const res = await waiting;
      assert.equal(res.body.status, 'running');
    });

    test('a VM that fails ends a wait for running with failed', async () => {
      const { key, vmId } = await newVm();
      const waiting = t.request('GET', `/v1/api/vms/${vmId}/wait?status=running&timeout_s=60`, { key });
      await hostWrites(vmId, 'failed');
      assert.equal((await waiting).body.status, 'failed');
    });

    test('a VM that already has the status is answered at once; a suspend that failed ends a wait for suspended', async () => {
      const { key, vmId } = await newVm();
      await hostWrites(vmId, 'running');
      const res = await t.request('GET', `/v1/api/vms/${vmId}/wait`, { key });
      assert.equal(res.body.status, 'running');
      // Running, and wanting to run: no suspend is in flight, so a wait for suspended is over.
      const again = await t.request('GET', `/v1/api/vms/${vmId}/wait?status=suspended&timeout_s=60`, { key });
      assert.equal(again.body.status, 'running');
    });

    test('when its time is up, the wait answers the VM as it is', async () => {
      const { key, vmId } = await newVm();
      const res = await t.request('GET', `/v1/api/vms/${vmId}/wait?status=running&timeout_s=1`, { key });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'provisioning');
    });

    test('a VM destroyed while waited for is 404, and so is a VM of another tenant', async () => {
      const { key, vmId } = await newVm();
      const waiting = t.request('GET', `/v1/api/vms/${vmId}/wait?timeout_s=60`, { key });
      await new Promise((r) => setTimeout(r, 50));
      assert.equal((await t.request('DELETE', `/v1/api/vms/${vmId}`, { key })).status, 200);
      const res = await waiting;
      assert.equal(res.status, 404);
      assert.equal(res.body.error, 'not_found');
      const other = await newVm();
      assert.equal((await t.request('GET', `/v1/api/vms/${other.vmId}/wait?timeout_s=1`, { key })).status, 404);
    });

    test('a bad status or timeout is 400 naming it', async () => {
      const { key, vmId } = await newVm();
      for (const q of ['status=provisioning', 'status=deleted', 'timeout_s=0', 'timeout_s=61', 'timeout_s=1.5', 'timeout_s=x', 'wait=1']) {
        const res = await t.request('GET', `/v1/api/vms/${vmId}/wait?${q}`, { key });
        assert.equal(res.status, 400, q);
        assert.equal(res.body.error, 'invalid_request', q);
      }
    });
  });
}
