/**
 * The VM host's run recorder across a restart of the host, on the real store with the guest's own run
 * keeping (guest/runs.ts, the code the guest agent runs) behind a stand-in for the VM's agent channel.
 * The case: the host that sent a run's start was killed before it marked the run running, and the
 * guest ran it to its end meanwhile. The next host process sends the start again; the guest answers
 * that it knows the run, and the host must then ask it for what it has (its output and its end).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import os from 'node:os';
import { backends, createTestApp, insertVm, until, type TestApp } from './helpers.ts';
import { RunRecorder } from '../src/host/runRecorder.ts';
import { GuestRuns } from '../src/guest/runs.ts';
import { RunFeed } from '../src/feeds/runFeed.ts';
import { createLogger } from '../src/log.ts';
import * as runStore from '../src/store/runs.ts';
import { newId } from '../src/domain/ids.ts';
import type { QemuDriver } from '../src/vmm/qemu.ts';
import type { RunStartArgs } from '../src/wire/protocol.ts';

/** The VM's agent channel as one host process sees it: requests reach the guest's runs, its notifications come back while connected. */
class AgentChannel extends EventEmitter {
  connected = true;
  /** When set, a run_start reaches the guest and its answer never comes back (the process dies meanwhile). */
  dieOnStart = false;
  constructor(
    private readonly vmId: string,
    private readonly guest: GuestRuns,
  ) {
    super();
  }
  isRunning = () => true;
  holdsMemory = () => false;
  async request<T>(vmId: string, op: string, args: any): Promise<T> {
    assert.equal(vmId, this.vmId);
    if (!this.connected) return new Promise<T>(() => undefined);
    if (op === 'run_start') {
      const answer = this.guest.start(args as RunStartArgs, { cwd: os.tmpdir(), env: { PATH: '/usr/bin:/bin' }, uid: process.getuid!(), gid: process.getgid!() });
      if (this.dieOnStart) {
        this.connected = false;
        return new Promise<T>(() => undefined);
      }
      return answer as T;
    }
    if (op === 'run_sync') return this.guest.sync(args.run_id, args.after) as T;
    if (op === 'run_ack') return (this.guest.ack(args.run_id, args.seq, args.done === true), { acked: true }) as T;
    throw new Error(`unexpected request ${op}`);
  }
  heard(msg: object): void {
    if (this.connected) this.emit('agent-event', this.vmId, msg);
  }
}

for (const backend of backends()) {
  describe(`a host's runs across its restart, on ${backend.name}`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp(backend);
    });
    after(async () => t?.close());

    test('a run whose start the killed host sent, ended in the guest meanwhile: the next host process ends it with its output', async () => {
      const { tenantId } = await t.tenant();
      const vmId = await insertVm(t.db, tenantId);
      await t.services.hosts.register({ host_id: 'host_r', name: 'host_r', accel: 'tcg', vcpus_total: 2, memory_mib_total: 4096, disk_gib_total: 40, internal_url: null, image_id: 'img_guest' });
      await t.db.query(`UPDATE vms SET host_id = 'host_r' WHERE vm_id = $1`, [vmId]);
      const runId = newId('run');
      await runStore.insert(t.db, {
        run_id: runId, tenant_id: tenantId, vm_id: vmId, task: 't', harness: 'echo', model: null, provider: null,
        argv: ['/bin/echo', 'hello from the run'], env: {}, timeout_ms: 60_000, max_output_bytes: 1 << 20, boots: 0, created_at: new Date(),
      });
      let channel: AgentChannel;
      const guest = new GuestRuns((msg) => channel.heard(msg), () => undefined);
      const feed = new RunFeed(t.db);
      const recorder = (c: AgentChannel) =>
        new RunRecorder({ db: t.db, clock: t.services.clock, driver: c as unknown as QemuDriver, hostId: 'host_r', feed, log: createLogger('error'), sweepMs: 50 });

      // The first process: its run_start reaches the guest, then it is gone.
      channel = new AgentChannel(vmId, guest);
      channel.dieOnStart = true;
      const first = recorder(channel);
      first.start();
      await until('the guest has the run', async () => guest.sync(runId, 0).known);
      void first.stop();
      assert.equal((await runStore.byId(t.db, runId))!.status, 'queued');

      // The next process, on the same guest.
      channel = new AgentChannel(vmId, guest);
      const next = recorder(channel);
      next.start();
      try {
        const run = await until('the run ends', async () => {
          const r = await runStore.byId(t.db, runId);
          return r && !['queued', 'running'].includes(r.status) && r;
        }, 10_000);
        assert.equal(run!.status, 'succeeded');
        assert.equal(run!.stdout, 'hello from the run\n');
      } finally {
        await next.stop();
        await feed.close();
      }
    });
  });
}
