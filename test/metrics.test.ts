/**
 * VM metrics without QEMU: what GET /v1/api/vms/{id}/metrics answers from the latest sample a host
 * wrote (egress summed from the egress log, sizes from the VM), before any sample (409 for a VM that is
 * not running, 503 for one just started), for a stopped VM (its last sample), and the sampler's
 * readings of /proc and of the guest's report.
 */
import { describe, test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, insertVm, type TestApp } from './helpers.ts';
import * as metricsStore from '../src/store/metrics.ts';
import * as egressStore from '../src/store/egress.ts';
import { MetricsSampler, parseGuestReport, processPssMib, processTimes } from '../src/host/metrics.ts';
import type { QemuDriver } from '../src/vmm/qemu.ts';
import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';
import { systemClock } from '../src/domain/clock.ts';
import { createLogger } from '../src/log.ts';

for (const backend of backends()) {
  describe(`VM metrics on ${backend.name}`, () => {
    let t: TestApp;
    beforeEach(async () => {
      t = await createTestApp(backend);
    });
    afterEach(() => t.close());

    test('the latest sample, with the egress log summed and the sizes of the VM', async () => {
      const tenant = await t.tenant();
      const read = (await t.request('POST', '/v1/api/keys', { key: tenant.key, body: { scope: 'read' } })).body.key;
      const vmId = await insertVm(t.db, tenant.tenantId, { plan: 'pro' });
      await t.db.query('UPDATE vms SET memory_mib = 4096, disk_gib = 50 WHERE vm_id = $1', [vmId]);
      const url = `/v1/api/vms/${vmId}/metrics`;

      const early = await t.request('GET', url, { key: tenant.key });
      assert.equal(early.status, 503, early.text);
      assert.equal(early.body.error, 'unavailable');

      for (const [out, inn] of [[100, 2000], [50, 30]]) {
        const id = await egressStore.logConnection(t.db, vmId, { at: new Date(), host: 'registry.npmjs.org', port: 443, decision: 'allowed', reason: 'allowlist' });
        await egressStore.logBytes(t.db, id, out, inn);
      }
      const at = new Date('2026-11-20T10:00:00.000Z');
      await metricsStore.saveSample(t.db, vmId, { cpu_percent: 37.5, memory_used_mib: 812, disk_used_bytes: 123_456_789 }, at);
      const res = await t.request('GET', url, { key: read });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, {
        cpu_percent: 37.5,
        memory_used_mib: 812,
        memory_mib: 4096,
        disk_used_bytes: 123_456_789,
        disk_bytes: 50 * 2 ** 30,
        egress_bytes_out: 150,
        egress_bytes_in: 2030,
        sampled_at: at.toISOString(),
      });

      // The guest did not answer this time: the disk keeps its last value; the next sample replaces the rest.
      const later = new Date(at.getTime() + 5000);
      await metricsStore.saveSample(t.db, vmId, { cpu_percent: 0, memory_used_mib: 900, disk_used_bytes: null }, later);
      const again = (await t.request('GET', url, { key: tenant.key })).body;
      assert.equal(again.disk_used_bytes, 123_456_789);
      assert.equal(again.memory_used_mib, 900);
      assert.equal(again.sampled_at, later.toISOString());

      // Stopped since: its last sample.
      await t.db.query(`UPDATE vms SET status = 'stopped', desired_state = 'stopped' WHERE vm_id = $1`, [vmId]);
      assert.equal((await t.request('GET', url, { key: tenant.key })).body.sampled_at, later.toISOString());
    });

    test('the sampler asks a quiet guest for its figures once in a while, a busy one every time', async () => {
      // Two real processes stand for two VMs' QEMUs: one asleep, one spinning. The driver is a double
      // that counts the guest's `stats` questions (the real agent answers them in metrics-vm.test.ts).
      const tenant = await t.tenant();
      const quietVm = await insertVm(t.db, tenant.tenantId);
      const busyVm = await insertVm(t.db, tenant.tenantId);
      const quiet = spawn('sleep', ['60']);
      const busy = spawn('sh', ['-c', 'while :; do :; done']);
      const asked = { [quietVm]: 0, [busyVm]: 0 };
      const driver = {
        pidOf: (vmId: string) => (vmId === quietVm ? quiet.pid : busy.pid),
        isRunning: () => true,
        request: async (vmId: string, op: string) => {
          assert.equal(op, 'stats');
          asked[vmId]++;
          return { mem_total_kib: 1024 * 1024, mem_available_kib: 1024 * (1024 - 100 - asked[vmId]), disk_used_bytes: 4096 * asked[vmId] };
        },
      } as unknown as QemuDriver;
      const sampler = new MetricsSampler({ db: t.db, clock: systemClock, driver, hostId: 'h', log: createLogger('warn', new Writable({ write: (_c, _e, cb) => cb() })), guestMaxAgeMs: 5000 });
      const latest = async (vmId: string) => (await metricsStore.latest(t.db, vmId))!;
      const firstAt = Date.now();
      try {
        for (let i = 0; i < 3; i++) {
          await Promise.all([sampler.sample(quietVm, 1), sampler.sample(busyVm, 1)]);
          await new Promise((r) => setTimeout(r, 400));
        }
        assert.deepEqual([asked[quietVm], asked[busyVm]], [1, 3]);
        // The quiet VM's samples carry its guest's last figures, with a fresh CPU reading.
        const q = await latest(quietVm);
        assert.deepEqual([q.memory_used_mib, q.disk_used_bytes, q.cpu_percent], [101, 4096, 0]);
        assert.equal((await latest(busyVm)).memory_used_mib, 103);
        // Past guestMaxAgeMs the quiet guest is asked again (a margin that a slow machine keeps).
        await new Promise((r) => setTimeout(r, Math.max(0, firstAt + 5100 - Date.now())));
        await sampler.sample(quietVm, 1);
        assert.equal(asked[quietVm], 2);
        assert.equal((await latest(quietVm)).disk_used_bytes, 8192);
      } finally {
        quiet.kill('SIGKILL');
        busy.kill('SIGKILL');
      }
    });

    test('a VM never sampled that is not running is 409 vm_not_running; unknown and malformed ids are 404', async () => {
      const tenant = await t.tenant();
      const other = await t.tenant();
      const vmId = await insertVm(t.db, tenant.tenantId, { status: 'stopped' });
      const res = await t.request('GET', `/v1/api/vms/${vmId}/metrics`, { key: tenant.key });
      assert.equal(res.status, 409, res.text);
      assert.equal(res.body.error, 'vm_not_running');
      const foreign = await t.request('GET', `/v1/api/vms/${vmId}/metrics`, { key: other.key });
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.error, 'not_found');
      const bad = await t.request('GET', '/v1/api/vms/not-a-vm/metrics', { key: tenant.key });
      // As every VM path: an id that cannot be a VM's is one that is not there.
      assert.equal(bad.status, 404, bad.text);
      assert.equal(bad.body.error, 'not_found');
    });
  });
}

describe('the sampler readings', () => {
  test('the guest report: memory in use and persist-disk bytes; missing parts are null', () => {
    const report = 'MemTotal:        1014000 kB\nMemFree:          500000 kB\nMemAvailable:     604400 kB\nDISK /dev/vdb 10501771264 49152 9947611136 1% /persist\n';
    assert.deepEqual(parseGuestReport(report), { memoryUsedMib: 400, diskUsedBytes: 49152 });
    assert.deepEqual(parseGuestReport('DISK\n'), { memoryUsedMib: null, diskUsedBytes: null });
  });

  test("a process's CPU ticks grow with its work, and its proportional set size is read", async () => {
    const before = await processTimes(process.pid);
    // Work until 200 ms of CPU time show (a loaded machine gives this process less than all of a core).
    const deadline = Date.now() + 10_000;
    let after = before;
    while (after.cpuTicks - before.cpuTicks < 20 && Date.now() < deadline) {
      const until = Date.now() + 50;
      while (Date.now() < until);
      after = await processTimes(process.pid);
    }
    assert.ok(after.cpuTicks - before.cpuTicks >= 20, `${after.cpuTicks - before.cpuTicks} ticks in 10 s of work`);
    assert.ok(after.startTicks > 0);
    assert.ok((await processPssMib(process.pid)) > 10);
  });
});
