/**
 * The host reconciler: a level-triggered loop that converges every VM placed on this host to its
 * desired state. It claims a VM with a lease before acting, so that two loops never act on one VM;
 * within this process one VM has at most one action in flight. It also meters running tier VMs and
 * records what the driver notices (a QEMU that died).
 */
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { BillingService } from '../domain/billing.ts';
import type { HostService } from '../domain/hosts.ts';
import { meterVm } from '../domain/metering.ts';
import { recordCreditsLow, recordVmChange } from '../domain/events.ts';
import type { VmFeed } from '../feeds/feed.ts';
import * as vmStore from '../store/vms.ts';
import * as runStore from '../store/runs.ts';
import * as imageStore from '../store/images.ts';
import * as templateStore from '../store/templates.ts';
import type { VmRecord } from '../store/vms.ts';
import type { ExitInfo, QemuDriver, VmSpec } from '../vmm/qemu.ts';
import type { Image } from '../image/build.ts';
import { netOfSlot } from '../vmm/commandLine.ts';
import type { Logger } from '../log.ts';
import { randomBase62 } from '../domain/ids.ts';
import { DamagedState } from '../vmm/suspend.ts';

export interface ReconcilerOptions {
  db: Db;
  clock: Clock;
  driver: QemuDriver;
  billing: BillingService;
  hosts: HostService;
  hostId: string;
  /** Word of each status the host writes, for the waits on it. */
  feed?: VmFeed;
  log: Logger;
  /** The image a VM with this id boots; null while it is not built (the VM waits). */
  image: (imageId: string | null) => Promise<Image | null>;
  /** The image new and reprovisioned VMs get. */
  currentImageId: () => string | null;
  intervalMs?: number;
  meterIntervalMs?: number;
  /** How often the host writes its heartbeat (well under the staleness the API replicas use). */
  heartbeatMs?: number;
  leaseMs?: number;
  /** Cold boots at once; more wait their turn (TCG boots are CPU-bound). */
  maxConcurrentBoots?: number;
  /** Starts from a saved machine (a golden snapshot, a suspend) at once: each is a fraction of a boot. */
  maxConcurrentResumes?: number;
}

const PLATFORM_REASONS = new Set<string>(vmStore.PLATFORM_STOP_REASONS);

/** What one pass over a VM came to: its desired state reached, or something it must wait for first. */
type Outcome = { done: true } | { done: false; waitingFor: string };
const DONE: Outcome = { done: true };

/** Retry delays of a VM that cannot proceed yet: 250 ms doubling to 30 s. */
export function retryDelayMs(attempts: number): number {
  return Math.min(30_000, 250 * 2 ** Math.min(attempts, 7));
}

/** The part of a row a customer changes: a new request on a waiting VM is acted on at once. */
const generation = (row: vmStore.VmState) => `${row.desired_state}:${row.restart_requested}:${row.reprovision_requested}`;

/** The restart and reprovision requests a boot of this row serves (acknowledged whether it boots or fails). */
const served = (row: VmRecord) => ({ restartDone: row.restart_requested, reprovisionDone: row.reprovision_requested });

export class Reconciler {
  readonly owner: string;
  private readonly inflight = new Map<string, Promise<void>>();
  private timer?: NodeJS.Timeout;
  private meterTimer?: NodeJS.Timeout;
  private heartbeatTimer?: NodeJS.Timeout;
  private running = false;
  private stopped = false;
  private ticking?: Promise<void>;
  private again = false;
  private scheduled?: NodeJS.Immediate;
  /** VMs that could not proceed: not taken again before `at`, unless their generation changes. */
  private readonly waits = new Map<string, { at: number; attempts: number; generation: string; waitingFor: string }>();
  private readonly slots = { boot: { busy: 0, queue: [] as Array<() => void> }, resume: { busy: 0, queue: [] as Array<() => void> } };

  constructor(private readonly o: ReconcilerOptions) {
    this.owner = `${o.hostId}:${process.pid}:${randomBase62(6)}`;
    o.driver.on('exit', (vmId: string, info: ExitInfo) => {
      if (!info.expected) void this.recordCrash(vmId, info.reason).catch((err) => o.log.error({ err, vm_id: vmId }, 'recording a crash failed'));
      this.kick();
    });
  }

  /** Takes over this host's VMs after a (re)start: leases of earlier processes of this host end, running QEMUs are adopted. */
  async start(): Promise<void> {
    const { db, hostId, driver, log } = this.o;
    await vmStore.releaseLeasesOfHost(db, hostId);
    const rows = await vmStore.listOnHost(db, hostId);
    const known = new Set(rows.map((r) => r.vm_id));
    // All at once: a guest killed mid-boot makes its adoption wait for its agent's answer.
    const adopted = (await Promise.all(rows.map((row) => driver.adopt(row.vm_id)))).filter(Boolean).length;
    // Standby VMs an earlier process made and no VM took.
    await driver.sweepStandbys();
    // A directory without a row (its create rolled back, or its row is gone): stop and remove it.
    const orphans = (await driver.listVmDirs()).filter((dir) => !known.has(dir));
    await Promise.all(
      orphans.map((dir) => {
        log.warn({ vm_id: dir }, 'removing a VM directory that no VM row owns');
        return driver.destroy(dir);
      }),
    );
    if (adopted) log.info({ adopted }, 're-adopted running VMs');
    if (this.stopped) return;
    this.running = true;
    this.timer = setInterval(() => this.kick(), this.o.intervalMs ?? 1000);
    this.meterTimer = setInterval(() => void this.meterAll(), this.o.meterIntervalMs ?? 10_000);
    this.heartbeatTimer = setInterval(
      () => void this.o.hosts.heartbeat(hostId, this.o.currentImageId()).catch(() => undefined),
      this.o.heartbeatMs ?? 15_000,
    );
    this.kick();
  }

  /** Stops the loop and waits for actions in flight; the VMs keep running. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.running = false;
    clearInterval(this.timer);
    clearInterval(this.meterTimer);
    clearInterval(this.heartbeatTimer);
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    await this.ticking;
    await Promise.allSettled([...this.inflight.values()]);
    await this.meterAll();
  }

  /**
   * Runs a pass soon (and another after the current one, if one is going). Never synchronously: a
   * pass starts from the event loop's check phase, so timers, I/O and requests always get a turn.
   */
  kick(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.scheduled ??= setImmediate(() => {
      this.scheduled = undefined;
      if (!this.running || this.ticking) return;
      this.ticking = this.tick()
        .catch((err) => this.o.log.error({ err }, 'reconcile pass failed'))
        .finally(() => {
          this.ticking = undefined;
          if (this.again) {
            this.again = false;
            this.kick();
          }
        });
    });
  }

  /** Something every waiting VM may have waited for has come (the image): retry them now. */
  wake(): void {
    this.waits.clear();
    this.kick();
  }

  /** What the VMs of this host that cannot proceed yet are waiting for (readiness reports it). */
  waiting(): Array<{ vm_id: string; waiting_for: string; retry_in_ms: number }> {
    const now = Date.now();
    return [...this.waits].map(([vmId, w]) => ({ vm_id: vmId, waiting_for: w.waitingFor, retry_in_ms: Math.max(0, w.at - now) }));
  }

  /** Resolves when no VM of this host needs work and nothing is in flight (tests and benchmarks). */
  async settled(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      await Promise.allSettled([...this.inflight.values()]);
      const rows = await vmStore.listStatesOnHost(this.o.db, this.o.hostId);
      if (this.inflight.size === 0 && !rows.some((r) => this.needsWork(r))) return;
      this.kick();
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('VMs did not settle in time');
  }

  private async tick(): Promise<void> {
    const rows = await vmStore.listStatesOnHost(this.o.db, this.o.hostId);
    const now = Date.now();
    for (const row of rows) {
      if (!this.running) return;
      if (this.inflight.has(row.vm_id) || !this.needsWork(row)) {
        if (!this.inflight.has(row.vm_id)) this.waits.delete(row.vm_id);
        continue;
      }
      const wait = this.waits.get(row.vm_id);
      if (wait && wait.generation === generation(row) && wait.at > now) continue;
      const p = this.converge(row)
        .then(
          (outcome) => this.recordOutcome(row, outcome),
          (err) => {
            this.o.log.error({ err, vm_id: row.vm_id }, 'reconcile failed');
            this.recordOutcome(row, { done: false, waitingFor: `a retry after an error: ${(err as Error).message}` });
          },
        )
        .finally(() => {
          this.inflight.delete(row.vm_id);
          this.kick();
        });
      this.inflight.set(row.vm_id, p);
    }
  }

  /** A VM that could not proceed is retried later, each time later (the 1 s loop picks it up when due). */
  private recordOutcome(row: vmStore.VmState, outcome: Outcome): void {
    if (outcome.done) {
      this.waits.delete(row.vm_id);
      return;
    }
    const previous = this.waits.get(row.vm_id);
    const attempts = previous && previous.generation === generation(row) ? previous.attempts + 1 : 0;
    this.waits.set(row.vm_id, { at: Date.now() + retryDelayMs(attempts), attempts, generation: generation(row), waitingFor: outcome.waitingFor });
  }

  needsWork(row: vmStore.VmState): boolean {
    const up = this.o.driver.isRunning(row.vm_id);
    if (row.desired_state === 'deleted') return true;
    if (row.desired_state === 'stopped') return up || row.status !== 'stopped';
    if (row.desired_state === 'suspended') return up || row.status !== 'suspended';
    if (row.reprovision_requested > row.reprovision_done || row.restart_requested > row.restart_done) return true;
    if (up) return row.status !== 'running';
    // Not running: boot it, unless it failed (a customer start or restart brings it back).
    return row.status !== 'failed';
  }

  private async claim(vmId: string): Promise<VmRecord | null> {
    const row = await vmStore.claimLease(this.o.db, vmId, {
      hostId: this.o.hostId,
      owner: this.owner,
      expiresAt: new Date(this.o.clock.now().getTime() + (this.o.leaseMs ?? 60_000)),
      now: this.o.clock.now(),
    });
    return row ?? null;
  }

  private async converge(seen: vmStore.VmState): Promise<Outcome> {
    const row = await this.claim(seen.vm_id);
    if (!row) return { done: false, waitingFor: 'a lease held by another process' };
    const renew = setInterval(() => void this.claim(row.vm_id).catch(() => undefined), (this.o.leaseMs ?? 60_000) / 3);
    try {
      return await this.act(row);
    } finally {
      clearInterval(renew);
      await vmStore.releaseLease(this.o.db, row.vm_id, this.owner);
    }
  }

  private async act(row: VmRecord): Promise<Outcome> {
    const { driver, db, clock } = this.o;
    if (row.desired_state === 'deleted') {
      await driver.destroy(row.vm_id);
      await vmStore.markDisksRemoved(db, row.vm_id, clock.now());
      // Its runs' records and output go with it.
      await runStore.deleteOfVm(db, row.vm_id);
      this.o.log.info({ vm_id: row.vm_id }, 'VM destroyed, disks removed');
      return DONE;
    }
    if (row.desired_state === 'stopped') {
      if (driver.isRunning(row.vm_id) || (await driver.ownPid(row.vm_id))) {
        await vmStore.setStatus(db, row.vm_id, 'stopping', PLATFORM_REASONS.has(row.status_reason ?? '') ? row.status_reason : null, ['stopped'], clock.now());
        await driver.stop(row.vm_id);
      }
      // A stopped VM keeps its disks, not its memory.
      await driver.discardSuspended(row.vm_id);
      await this.endMetering(row.vm_id);
      // A platform stop keeps its reason; a failed VM stays failed.
      await this.transition(row.vm_id, (tx) => vmStore.markStopped(tx, row.vm_id, clock.now()));
      return DONE;
    }
    if (row.desired_state === 'suspended') return this.suspend(row);
    const reprovision = row.reprovision_requested > row.reprovision_done;
    const restart = row.restart_requested > row.restart_done;
    if (!reprovision && !restart && driver.isRunning(row.vm_id)) {
      await this.transition(row.vm_id, (tx) => vmStore.markRunning(tx, row.vm_id, row.image_id, driver.facts(row.vm_id)?.ipv4 ?? null, clock.now()));
      return DONE;
    }
    const imageId = reprovision || !row.image_id ? this.o.currentImageId() : row.image_id;
    let image = await this.o.image(imageId);
    if (!image && !reprovision && row.image_id) {
      // The VM's own image is gone from this host: it boots on the current one.
      image = await this.o.image(this.o.currentImageId());
    }
    if (!image) return { done: false, waitingFor: 'the guest image' };
    if (driver.isRunning(row.vm_id) || (await driver.ownPid(row.vm_id))) await driver.stop(row.vm_id);
    // Suspended and started: resumed from its saved memory, unless restart or reprovision discard it.
    let lostMemory: string | null = null;
    if (!reprovision && !restart && (await driver.suspendRecord(row.vm_id))) {
      const resumed = await this.resume(row);
      if (resumed.done) return DONE;
      lostMemory = resumed.reason;
    }
    await driver.discardSuspended(row.vm_id);
    const spec = await this.specOf(row, image);
    // A new VM of the standby shape takes a standby VM: its start is the standby's second assume line.
    if (!reprovision && !restart) {
      const t0 = performance.now();
      const took = await driver.claimStandby(spec);
      if (took) {
        const t1 = performance.now();
        await this.transition(row.vm_id, async (tx) => {
          await vmStore.setNetSlot(tx, row.vm_id, took.netSlot);
          await vmStore.markBooted(tx, row.vm_id, served(row), clock.now());
          await vmStore.markRunning(tx, row.vm_id, image.id, took.facts.ipv4 ?? netOfSlot(took.netSlot).guest, clock.now());
        });
        this.o.log.info(
          { vm_id: row.vm_id, image_id: image.id, started_from: 'standby', start_ms: Math.round(t1 - t0), marked_ms: Math.round(performance.now() - t1), ...driver.phases.get(row.vm_id) },
          'VM running',
        );
        return DONE;
      }
    }
    const release = await this.acquireBootSlot((await driver.willResume(spec)) ? 'resume' : 'boot');
    try {
      const t0 = performance.now();
      await driver.prepareDisks(spec, reprovision || restart);
      const t1 = performance.now();
      const facts = await driver.start(spec);
      const t2 = performance.now();
      await this.transition(row.vm_id, async (tx) => {
        await vmStore.markBooted(tx, row.vm_id, served(row), clock.now());
        await vmStore.markRunning(tx, row.vm_id, image.id, facts.ipv4 ?? netOfSlot(row.net_slot!).guest, clock.now(), lostMemory);
      });
      this.o.log.info(
        {
          vm_id: row.vm_id,
          image_id: image.id,
          reprovision,
          restart,
          started_from: driver.startedFrom(row.vm_id),
          disks_ms: Math.round(t1 - t0),
          start_ms: Math.round(t2 - t1),
          marked_ms: Math.round(performance.now() - t2),
          ...driver.phases.get(row.vm_id),
        },
        'VM running',
      );
      return DONE;
    } catch (err) {
      const reason = `boot failed: ${(err as Error).message}`.slice(0, 500);
      await this.transition(row.vm_id, (tx) => vmStore.markBootFailed(tx, row.vm_id, reason, served(row), clock.now()));
      await this.endMetering(row.vm_id);
      this.o.log.warn({ vm_id: row.vm_id, reason }, 'VM failed to boot');
      return DONE;
    } finally {
      release();
    }
  }

  /**
   * Suspends a VM its customer wants suspended: saved and its QEMU gone, metering ended. A VM not
   * running here is suspended when its saved state is complete; otherwise its QEMU ended in the middle
   * and it is failed with the reason (a start boots it from its disks).
   */
  private async suspend(row: VmRecord): Promise<Outcome> {
    const { driver, clock } = this.o;
    if (driver.isRunning(row.vm_id)) {
      await vmStore.setStatus(this.o.db, row.vm_id, 'suspending', null, ['suspending'], clock.now());
      const t0 = performance.now();
      try {
        const saved = await driver.suspend(row.vm_id, { imageId: row.image_id ?? '', vcpus: row.vcpus, memoryMib: row.memory_mib });
        this.o.log.info({ vm_id: row.vm_id, bytes: saved.bytes, suspend_ms: Math.round(performance.now() - t0), ...driver.phases.get(row.vm_id) }, 'VM suspended');
      } catch (err) {
        const reason = `suspend failed: ${(err as Error).message}`.slice(0, 500);
        this.o.log.warn({ vm_id: row.vm_id, reason }, 'suspending a VM failed');
        if (driver.isRunning(row.vm_id)) {
          // The guest runs on as it was.
          await this.transition(row.vm_id, (tx) => vmStore.markSuspendFailed(tx, row.vm_id, 'running', reason, clock.now()));
          return DONE;
        }
      }
    }
    if (await driver.suspendRecord(row.vm_id)) {
      await this.endMetering(row.vm_id);
      await this.transition(row.vm_id, (tx) => vmStore.markSuspended(tx, row.vm_id, clock.now()));
      return DONE;
    }
    await this.endMetering(row.vm_id);
    await this.transition(row.vm_id, (tx) =>
      vmStore.markSuspendFailed(tx, row.vm_id, 'failed', 'the VM stopped while it was being suspended; its memory was not saved, its disks are kept', clock.now()),
    );
    return DONE;
  }

  /** The machine a VM's row asks for, on `image`. */
  private async specOf(row: VmRecord, image: Image): Promise<VmSpec> {
    if (row.net_slot === null) throw new Error(`${row.vm_id} has no network slot`);
    return {
      vmId: row.vm_id,
      vcpus: row.vcpus,
      memoryMib: row.memory_mib,
      diskGib: row.disk_gib,
      image,
      netSlot: row.net_slot,
      hostname: row.vm_id.replace(/_/g, '-').toLowerCase(),
      persistBacking: row.template_id ? await templateStore.imagePath(this.o.db, row.template_id) : null,
      upperBacking: row.root_image_id ? ((await imageStore.layerOfVm(this.o.db, row.vm_id))?.layer_path ?? null) : null,
    };
  }

  /** Resumes a suspended VM; answers the reason to give when its saved memory could not be used (it then boots fresh). */
  private async resume(row: VmRecord): Promise<{ done: true } | { done: false; reason: string }> {
    const { driver, clock } = this.o;
    const image = await this.o.image(row.image_id);
    if (!image) return { done: false, reason: 'its saved memory was lost: the image it ran on is gone from its host; booted fresh from its disks' };
    const spec = await this.specOf(row, image);
    const release = await this.acquireBootSlot('resume');
    try {
      const t0 = performance.now();
      const facts = await driver.resume(spec);
      await this.transition(row.vm_id, async (tx) => {
        await vmStore.markRunning(tx, row.vm_id, image.id, facts.ipv4 ?? netOfSlot(row.net_slot!).guest, clock.now());
        // Not a boot (booted_at stays), but its idle clock starts again here: the time it was suspended is not idle time.
        await vmStore.touchActivity(tx, row.vm_id, clock.now());
      });
      this.o.log.info({ vm_id: row.vm_id, resume_ms: Math.round(performance.now() - t0), ...driver.phases.get(row.vm_id) }, 'VM resumed from its suspend');
      return { done: true };
    } catch (err) {
      if (!(err instanceof DamagedState)) {
        // Kept for the next start (the saved state is whole; resuming failed for another reason).
        const reason = `resuming failed: ${(err as Error).message}`.slice(0, 500);
        await this.transition(row.vm_id, (tx) => vmStore.markBootFailed(tx, row.vm_id, reason, served(row), clock.now()));
        this.o.log.warn({ vm_id: row.vm_id, reason }, 'resuming a VM failed');
        return { done: true };
      }
      this.o.log.warn({ vm_id: row.vm_id, err: err.message }, 'the saved memory could not be used; booting fresh');
      return { done: false, reason: `its saved memory could not be restored (${err.message})`.slice(0, 400) + '; booted fresh from its disks' };
    } finally {
      release();
    }
  }

  /** Waits for a turn to start a VM: cold boots and resumes each have their own number at once. */
  private acquireBootSlot(kind: 'boot' | 'resume'): Promise<() => void> {
    const pool = this.slots[kind];
    const limit = kind === 'boot' ? (this.o.maxConcurrentBoots ?? 4) : (this.o.maxConcurrentResumes ?? 4);
    const release = () => {
      pool.busy--;
      pool.queue.shift()?.();
    };
    if (pool.busy < limit) {
      pool.busy++;
      return Promise.resolve(release);
    }
    return new Promise((resolve) => pool.queue.push(() => (pool.busy++, resolve(release))));
  }

  /** A QEMU ended without being asked to: the VM says so, and its metering stops. */
  private async recordCrash(vmId: string, reason: string): Promise<void> {
    const now = this.o.clock.now();
    await this.endMetering(vmId);
    let failed = false;
    await this.transition(vmId, async (tx) => {
      failed = await vmStore.recordCrash(tx, vmId, `the VM stopped unexpectedly: qemu ${reason}`, now);
    });
    if (failed) this.o.log.warn({ vm_id: vmId, reason }, 'VM crashed');
  }

  /** A status the host observed, written with its event (vm.running, vm.stopped, vm.failed) in one transaction. */
  private async transition(vmId: string, change: (tx: Queryable) => Promise<unknown>): Promise<void> {
    await this.o.db.transaction(async (tx) => {
      const before = await vmStore.lock(tx, vmId);
      await change(tx);
      if (before) await recordVmChange(tx, before, vmId, this.o.clock.now());
    });
    await this.o.feed?.publish({ vm_id: vmId }).catch((err) => this.o.log.warn({ err, vm_id: vmId }, 'publishing a VM change failed'));
  }

  private async endMetering(vmId: string): Promise<void> {
    await this.meterOne(vmId, false);
  }

  private async meterOne(vmId: string, running: boolean): Promise<void> {
    const { db, billing, clock } = this.o;
    await db.transaction(async (tx) => {
      const vm = await vmStore.lock(tx, vmId);
      if (!vm || !vm.tier || !vm.metered_until) return;
      const { exhausted, drawn } = await meterVm(tx, billing, vm, clock.now(), { running });
      if (exhausted) {
        const n = await vmStore.stopTierVmsOfTenant(tx, vm.tenant_id, clock.now());
        this.o.log.warn({ tenant_id: vm.tenant_id, stopped: n }, 'prepaid credits exhausted: tier VMs stopped');
      }
      // Last: the event takes the tenant's counter after every VM row this transaction locks.
      if (drawn > 0) {
        const balance = await billing.creditBalance(tx, vm.tenant_id);
        await recordCreditsLow(tx, vm.tenant_id, balance + drawn, balance, clock.now());
      }
    });
  }

  /** Draws what the running tier VMs of this host have used so far. */
  async meterAll(): Promise<void> {
    const vmIds = await vmStore.listMeteredOnHost(this.o.db, this.o.hostId).catch(() => [] as string[]);
    for (const vm_id of vmIds) {
      await this.meterOne(vm_id, this.o.driver.isRunning(vm_id)).catch((err) => this.o.log.error({ err, vm_id }, 'metering failed'));
    }
    if (vmIds.length) this.kick();
  }
}
