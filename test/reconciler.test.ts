/**
 * The reconciler's decisions without QEMU: a real database and API, the driver a fake that keeps
 * VmDriver's promises in memory (fakeDriver.ts). Each case the real-VM tests go through for the
 * reconciler (vm-real, suspend, lifecycle-vm) is here in milliseconds: start, standby, stop, restart
 * with a fresh root, reprovision, suspend and resume, a VM that died, adoption after a restart,
 * destroy, and the reason each failure leaves on the VM.
 */
import { describe, test, before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { backends, createTestApp, until, type TestApp } from './helpers.ts';
import { FakeDriver } from './fakeDriver.ts';
import { Reconciler } from '../src/host/reconciler.ts';
import { createLogger } from '../src/log.ts';
import { netOfSlot, STANDBY_SLOTS } from '../src/vmm/commandLine.ts';
import type { Image } from '../src/image/build.ts';
import type { VmSpec } from '../src/vmm/driver.ts';
import * as runStore from '../src/store/runs.ts';
import { newId } from '../src/domain/ids.ts';

const HOST = { host_id: 'host_test', name: 'test', accel: 'tcg', image_id: 'img_one', vcpus_total: 64, memory_mib_total: 64 * 1024, disk_gib_total: 10_000 };
const image = (id: string) => ({ id, dir: `/images/${id}`, kernel: '', initramfs: '', rootfs: '', manifest: { id } }) as unknown as Image;

interface Row {
  status: string;
  status_reason: string | null;
  desired_state: string;
  image_id: string | null;
  ipv4: string | null;
  net_slot: number | null;
  boots: number;
  booted_at: Date | null;
  restart_requested: number;
  restart_done: number;
  reprovision_done: number;
  metered_until: Date | null;
  disks_removed_at: Date | null;
}

for (const backend of backends()) {
  describe(`the reconciler's decisions on a fake driver (${backend.name})`, () => {
    let t: TestApp;
    let driver: FakeDriver;
    let reconciler: Reconciler;
    let key: string;
    let images: Set<string>;
    let current: string;
    const logs: string[] = [];

    const newReconciler = () =>
      new Reconciler({
        db: t.db,
        clock: t.services.clock,
        driver,
        billing: t.services.billing,
        hosts: t.services.hosts,
        hostId: HOST.host_id,
        log: createLogger('info', new Writable({ write: (c, _e, cb) => (logs.push(c.toString()), cb()) })),
        image: async (id) => (id && images.has(id) ? image(id) : null),
        currentImageId: () => current,
      });

    // One app for the file (building one is most of a test's time); each test has its own tenant, driver and reconciler.
    before(async () => {
      t = await createTestApp(backend);
      await t.services.hosts.register(HOST);
    });
    after(() => t.close());

    beforeEach(async () => {
      ({ key } = await t.tenant({ card: '4242', credits: 10_000 }));
      images = new Set(['img_one']);
      current = 'img_one';
      logs.length = 0;
      driver = new FakeDriver();
      reconciler = newReconciler();
      await reconciler.start();
    });
    afterEach(async () => {
      await reconciler.stop();
      // The host has no disks of this test's VMs any more: the next test's reconciler does not see them.
      await t.db.query('UPDATE vms SET disks_removed_at = now(), net_slot = NULL WHERE host_id = $1', [HOST.host_id]);
    });

    const row = async (vmId: string) => (await t.db.query<Row>('SELECT * FROM vms WHERE vm_id = $1', [vmId]))[0];
    const ask = async (method: string, path: string, body?: unknown) => {
      const res = await t.request(method, path, { key, body });
      assert.ok(res.status < 300, `${method} ${path}: ${res.text}`);
      await reconciler.settled(5000);
      return res.body;
    };
    const create = async (body: object = { harness: 'echo' }) => (await ask('POST', '/v1/api/vms', body)).vm_id as string;
    const act = (vmId: string, action: string) => ask('POST', `/v1/api/vms/${vmId}/${action}`);

    test('start: a new VM boots on the current image and runs at its slot\'s address', async () => {
      const vmId = await create();
      const vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.status_reason, null);
      assert.equal(vm.image_id, 'img_one');
      assert.equal(vm.ipv4, netOfSlot(vm.net_slot!).guest);
      assert.equal(vm.boots, 1);
      assert.deepEqual(driver.calls, [`run ${vmId}`]);
      assert.equal(driver.startedFrom(vmId), 'snapshot');
    });

    test('standby: a new VM of the kept shape takes a standby and its network slot; one from its own disks does not', async () => {
      driver.standbys.push('1:1024:10:img_one');
      const vmId = await create();
      const vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(driver.startedFrom(vmId), 'standby');
      assert.equal(vm.net_slot, STANDBY_SLOTS.first);
      assert.equal(vm.ipv4, netOfSlot(STANDBY_SLOTS.first).guest);
      // Stopped and started again: its own disks, the same slot, no standby taken.
      driver.standbys.push('1:1024:10:img_one');
      await act(vmId, 'stop');
      await act(vmId, 'start');
      assert.equal(driver.startedFrom(vmId), 'snapshot');
      assert.equal((await row(vmId)).net_slot, STANDBY_SLOTS.first);
      assert.equal(driver.standbys.length, 1);
    });

    test('stop and start: stopped with no QEMU; a second stop changes nothing; started again on the same disks', async () => {
      const vmId = await create();
      const disks = { ...driver.vms.get(vmId)!.disks! };
      await act(vmId, 'stop');
      assert.equal((await row(vmId)).status, 'stopped');
      assert.equal(await driver.actual(vmId), 'off');
      await act(vmId, 'stop');
      assert.deepEqual(driver.calls, [`run ${vmId}`, `halt ${vmId}`]);
      await act(vmId, 'start');
      assert.equal((await row(vmId)).status, 'running');
      assert.deepEqual(driver.vms.get(vmId)!.disks, disks, 'the root and persist disks are the ones it had');
    });

    test('restart: a fresh root on the same persist disk, the request acknowledged', async () => {
      const vmId = await create();
      const before = { ...driver.vms.get(vmId)!.disks! };
      const res = await act(vmId, 'restart');
      assert.equal(res.status, 'restarting');
      const vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.restart_done, vm.restart_requested);
      assert.equal(vm.boots, 2);
      assert.deepEqual(driver.calls.slice(-1), [`run:fresh ${vmId}`]);
      const after = driver.vms.get(vmId)!.disks!;
      assert.equal(after.persist, before.persist);
      assert.notEqual(after.root, before.root);
    });

    test('reprovision: a fresh root on the current image; the VM\'s own image gone: it boots on the current one', async () => {
      const vmId = await create();
      images.add('img_two');
      current = 'img_two';
      await act(vmId, 'reprovision');
      let vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.image_id, 'img_two');
      assert.equal(vm.reprovision_done, 1);
      assert.deepEqual(driver.calls.slice(-1), [`run:fresh ${vmId}`]);
      // Stopped; its image leaves the host; started: on the current image, its root kept.
      await act(vmId, 'stop');
      images.delete('img_two');
      images.add('img_three');
      current = 'img_three';
      await act(vmId, 'start');
      vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.image_id, 'img_three');
      assert.deepEqual(driver.calls.slice(-1), [`run ${vmId}`]);
    });

    test('no image yet: the VM waits for it and says so; it boots once the image comes', async () => {
      images.clear();
      const created = await t.request('POST', '/v1/api/vms', { key, body: { harness: 'echo' } });
      const vmId = created.body.vm_id as string;
      reconciler.kick();
      await until('the VM waits', async () => reconciler.waiting().some((w) => w.vm_id === vmId), 5000);
      assert.equal((await row(vmId)).status, 'provisioning');
      assert.deepEqual(reconciler.waiting().map((w) => [w.vm_id, w.waiting_for]), [[vmId, 'the guest image']]);
      assert.deepEqual(driver.calls, []);
      images.add('img_one');
      reconciler.wake();
      await reconciler.settled(5000);
      assert.equal((await row(vmId)).status, 'running');
    });

    test('suspend and start: saved with no QEMU, metering ended; started, it resumes from its memory with its boot unchanged', async () => {
      const vmId = await create({ harness: 'echo', tier: 'ondemand' });
      assert.ok((await row(vmId)).metered_until, 'a running tier VM is metered');
      const booted = (await row(vmId)).booted_at;
      await act(vmId, 'suspend');
      let vm = await row(vmId);
      assert.equal(vm.status, 'suspended');
      assert.equal(vm.metered_until, null);
      assert.equal(await driver.actual(vmId), 'suspended');
      await act(vmId, 'start');
      vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.status_reason, null);
      assert.equal(driver.startedFrom(vmId), 'suspended');
      assert.equal(vm.boots, 1);
      assert.deepEqual(vm.booted_at, booted);
      assert.deepEqual(driver.calls, [`run ${vmId}`, `suspend ${vmId}`, `resume ${vmId}`]);
    });

    test('a suspended VM stopped or restarted forgets its memory and boots from its disks', async () => {
      const vmId = await create();
      await act(vmId, 'suspend');
      await act(vmId, 'stop');
      assert.equal((await row(vmId)).status, 'stopped');
      assert.equal(await driver.actual(vmId), 'off');
      await act(vmId, 'start');
      assert.deepEqual(driver.calls.slice(-1), [`run ${vmId}`]);
      await act(vmId, 'suspend');
      await act(vmId, 'restart');
      assert.equal((await row(vmId)).status, 'running');
      assert.deepEqual(driver.calls.slice(-2), [`suspend ${vmId}`, `run:fresh ${vmId}`], 'not resumed first');
    });

    test('damaged saved memory: the start boots from the disks and says why', async () => {
      const vmId = await create();
      await act(vmId, 'suspend');
      driver.vms.get(vmId)!.saved!.damaged = true;
      await act(vmId, 'start');
      const vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.status_reason, 'its saved memory could not be restored (the saved state does not match its checksum); booted fresh from its disks');
      assert.deepEqual(driver.calls.slice(-2), [`resume ${vmId}`, `run ${vmId}`]);
      assert.equal(driver.startedFrom(vmId), 'snapshot');
    });

    test('the image a suspended VM ran on is gone: it boots from its disks on the current one and says so', async () => {
      const vmId = await create();
      await act(vmId, 'suspend');
      images.clear();
      images.add('img_two');
      current = 'img_two';
      await act(vmId, 'start');
      const vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.image_id, 'img_two');
      assert.equal(vm.status_reason, 'its saved memory was lost: the image it ran on is gone from its host; booted fresh from its disks');
      assert.deepEqual(driver.calls.slice(-1), [`run ${vmId}`]);
    });

    test('a resume that fails while the memory stays whole: failed with the reason, and the next start resumes', async () => {
      const vmId = await create();
      await act(vmId, 'suspend');
      driver.failNext.set(vmId, { resume: 'the guest agent did not answer' });
      await act(vmId, 'start');
      let vm = await row(vmId);
      assert.equal(vm.status, 'failed');
      assert.equal(vm.status_reason, 'resuming failed: the guest agent did not answer');
      assert.equal(await driver.actual(vmId), 'suspended', 'its memory is kept');
      await act(vmId, 'start');
      vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(driver.startedFrom(vmId), 'suspended');
    });

    test('a suspend that fails: the VM runs on when its QEMU does, and is failed when its QEMU died under it', async () => {
      const vmId = await create();
      driver.failNext.set(vmId, { suspend: { message: 'migration failed', then: 'runs on' } });
      await act(vmId, 'suspend');
      let vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.desired_state, 'running');
      assert.equal(vm.status_reason, 'suspend failed: migration failed');
      driver.failNext.set(vmId, { suspend: { message: 'the QEMU went away', then: 'dies' } });
      await act(vmId, 'suspend');
      vm = await row(vmId);
      assert.equal(vm.status, 'failed');
      assert.equal(vm.status_reason, 'the VM stopped while it was being suspended; its memory was not saved, its disks are kept');
      assert.equal(await driver.actual(vmId), 'off');
    });

    test('a VM whose QEMU died is failed with the reason, and stays so until its customer starts it', async () => {
      const vmId = await create();
      driver.crash(vmId, 'exited with signal SIGKILL');
      // The exit is recorded by its own handler, beside the passes: wait for the row, then for a pass after it.
      await until('the crash recorded', async () => (await row(vmId)).status === 'failed', 10_000);
      await reconciler.settled(5000);
      const vm = await row(vmId);
      assert.equal(vm.status, 'failed');
      assert.equal(vm.status_reason, 'the VM stopped unexpectedly: qemu exited with signal SIGKILL');
      assert.deepEqual(driver.calls, [`run ${vmId}`], 'not booted again on its own');
      await act(vmId, 'start');
      assert.equal((await row(vmId)).status, 'running');
    });

    test('a boot that fails: failed with the reason, the restart it served acknowledged; a start boots it', async () => {
      const vmId = await create();
      driver.failNext.set(vmId, { start: 'the guest agent did not answer within 90 s' });
      await act(vmId, 'restart');
      let vm = await row(vmId);
      assert.equal(vm.status, 'failed');
      assert.equal(vm.status_reason, 'boot failed: the guest agent did not answer within 90 s');
      assert.equal(vm.restart_done, vm.restart_requested);
      assert.equal(await driver.actual(vmId), 'off');
      await act(vmId, 'start');
      vm = await row(vmId);
      assert.equal(vm.status, 'running');
      assert.equal(vm.status_reason, null);
    });

    test('a QEMU of the VM that this process does not run is ended before a boot, and by a stop', async () => {
      const a = await create();
      const b = await create();
      await act(a, 'stop');
      driver.stray(a);
      await act(a, 'start');
      assert.equal(driver.isRunning(a), true);
      assert.equal((await row(a)).status, 'running');
      assert.deepEqual(driver.calls.slice(-1), [`run ${a}`]);
      // A new host process could not adopt b's QEMU; its customer stops it meanwhile.
      await reconciler.stop();
      driver.vms.get(b)!.process = { ours: false };
      assert.equal((await t.request('POST', `/v1/api/vms/${b}/stop`, { key })).status, 200);
      reconciler = newReconciler();
      await reconciler.start();
      await reconciler.settled(5000);
      assert.equal((await row(b)).status, 'stopped');
      assert.equal(await driver.actual(b), 'off');
      assert.deepEqual(driver.calls.slice(-1), [`halt ${b}`]);
    });

    test('after a restart of the host process: running QEMUs are adopted, not booted again; one that ended boots; directories no row owns go', async () => {
      const kept = await create();
      const gone = await create();
      await reconciler.stop();
      // A new process: the first one's QEMU of `kept` is left running, `gone`'s ended meanwhile.
      const before = driver;
      driver = new FakeDriver();
      driver.leftRunning.set(kept, (before.vms.get(kept)!.process as { spec: VmSpec }).spec);
      for (const id of [kept, gone]) driver.vms.set(id, { disks: before.vms.get(id)!.disks, process: null, saved: null });
      driver.vms.set('vm_orphan', { disks: { root: 1, persist: 2 }, process: null, saved: null });
      reconciler = newReconciler();
      await reconciler.start();
      await reconciler.settled(5000);
      assert.equal(driver.isRunning(kept), true);
      assert.equal(driver.isRunning(gone), true);
      assert.deepEqual(driver.calls, ['destroy vm_orphan', `run ${gone}`]);
      assert.ok(logs.some((l) => l.includes('re-adopted running VMs') && l.includes('"adopted":1')));
      for (const id of [kept, gone]) assert.equal((await row(id)).status, 'running');
    });

    test('destroy: the VM and its disks are gone, its network slot free, its runs deleted', async () => {
      const vmId = await create();
      await act(vmId, 'suspend');
      const { tenant_id } = (await t.db.query<{ tenant_id: string }>('SELECT tenant_id FROM vms WHERE vm_id = $1', [vmId]))[0];
      await runStore.insert(t.db, {
        run_id: newId('run'), tenant_id, vm_id: vmId, task: 'true', harness: 'echo', model: null, provider: null, argv: ['true'], env: {},
        timeout_ms: 1000, max_output_bytes: 1024, boots: 1, created_at: new Date(),
      });
      assert.equal((await t.db.query('SELECT run_id FROM runs WHERE vm_id = $1', [vmId])).length, 1);
      const res = await t.request('DELETE', `/v1/api/vms/${vmId}`, { key });
      assert.equal(res.status, 200);
      await reconciler.settled(5000);
      const vm = await row(vmId);
      assert.ok(vm.disks_removed_at);
      assert.equal(vm.net_slot, null);
      assert.equal(driver.vms.has(vmId), false);
      assert.deepEqual(driver.calls.slice(-1), [`destroy ${vmId}`]);
      assert.deepEqual(await t.db.query('SELECT run_id FROM runs WHERE vm_id = $1', [vmId]), []);
    });
  });
}
