/**
 * The host reconciler: converges every VM placed on this host to its desired state. It claims a VM
 * with a lease before acting, so that two loops never act on one VM; within this process one VM has
 * at most one action in flight (reconcileLoop.ts). It also meters running tier VMs and records what
 * the driver notices (a QEMU that died). It sees the driver only through VmDriver (vmm/driver.ts).
 */
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { BillingService } from '../domain/billing.ts';
import type { HostService } from '../domain/hosts.ts';
import { meterVm } from '../domain/metering.ts';
import { recordCreditsLow, recordVmChange } from '../domain/events.ts';
import type { VmFeed } from '../feeds/feed.ts';
import * as vmStore from '../store/vms.ts';
import * as hostVmStore from '../store/vmsOnHost.ts';
import * as runStore from '../store/runs.ts';
import * as ledgerStore from '../store/ledger.ts';
import * as imageStore from '../store/images.ts';
import * as templateStore from '../store/templates.ts';
import type { VmRecord } from '../store/vms.ts';
import type { ActualState, ExitInfo, VmDriver, VmSpec } from '../vmm/driver.ts';
import type { Image } from '../image/build.ts';
import type { Logger } from '../log.ts';
import { randomBase62 } from '../domain/ids.ts';
import { DONE, ReconcileLoop, type Outcome } from './reconcileLoop.ts';

export { retryDelayMs } from './reconcileLoop.ts';

export interface ReconcilerOptions {
  db: Db;
  clock: Clock;
  driver: VmDriver;
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
}

/** What the customer asked of a VM: its desired state, or running from a fresh root (a restart or reprovision it asked for). */
type Desired = hostVmStore.VmState['desired_state'] | 'fresh';
type Action = 'destroy' | 'stop' | 'markStopped' | 'suspend' | 'markSuspended' | 'failSuspend' | 'markRunning' | 'resume' | 'boot';

/**
 * The whole policy: what a pass does, by what the customer asked (rows) and what of the VM is on this
 * host (columns: a QEMU of ours, its saved memory, a QEMU of its directory we do not run, nothing).
 */
const POLICY: Record<Desired, Record<ActualState, Action>> = {
  deleted:   { running: 'destroy',     suspended: 'destroy',       stray: 'destroy',     off: 'destroy' },
  stopped:   { running: 'stop',        suspended: 'markStopped',   stray: 'stop',        off: 'markStopped' },
  suspended: { running: 'suspend',     suspended: 'markSuspended', stray: 'failSuspend', off: 'failSuspend' },
  running:   { running: 'markRunning', suspended: 'resume',        stray: 'boot',        off: 'boot' },
  fresh:     { running: 'boot',        suspended: 'boot',          stray: 'boot',        off: 'boot' },
};

const restartAsked = (row: hostVmStore.VmState) => row.restart_requested > row.restart_done;
const reprovisionAsked = (row: hostVmStore.VmState) => row.reprovision_requested > row.reprovision_done;
const desiredOf = (row: hostVmStore.VmState): Desired => (row.desired_state === 'running' && (restartAsked(row) || reprovisionAsked(row)) ? 'fresh' : row.desired_state);

/** The restart and reprovision requests a boot of this row serves (acknowledged whether it boots or fails). */
const served = (row: VmRecord) => ({ restartDone: row.restart_requested, reprovisionDone: row.reprovision_requested });
const PLATFORM_REASONS = new Set<string>(vmStore.PLATFORM_STOP_REASONS);

export class Reconciler {
  readonly owner: string;
  private readonly loop: ReconcileLoop;
  private meterTimer?: NodeJS.Timeout;
  private heartbeatTimer?: NodeJS.Timeout;

  constructor(private readonly o: ReconcilerOptions) {
    this.owner = `${o.hostId}:${process.pid}:${randomBase62(6)}`;
    this.loop = new ReconcileLoop({
      rows: () => hostVmStore.listStatesOnHost(o.db, o.hostId),
      needsWork: (row) => this.needsWork(row),
      converge: (row) => this.converge(row),
      log: o.log,
      intervalMs: o.intervalMs,
    });
    o.driver.on('exit', (vmId: string, info: ExitInfo) => {
      if (info.expected) return this.kick();
      // Until the crash is written, no pass takes the VM for one to boot (its row still says running).
      this.crashing.add(vmId);
      void this.recordCrash(vmId, info.reason)
        .catch((err) => o.log.error({ err, vm_id: vmId }, 'recording a crash failed'))
        .finally(() => {
          this.crashing.delete(vmId);
          this.kick();
        });
    });
  }

  /** VMs whose QEMU ended unasked, while their crash is being written. */
  private readonly crashing = new Set<string>();

  /** Whether a VM's row and what runs here disagree (the loop acts on those). */
  needsWork(row: hostVmStore.VmState): boolean {
    if (this.crashing.has(row.vm_id)) return false;
    const up = this.o.driver.isRunning(row.vm_id);
    if (row.desired_state === 'deleted') return true;
    if (row.desired_state === 'stopped') return up || row.status !== 'stopped';
    if (row.desired_state === 'suspended') return up || row.status !== 'suspended';
    if (reprovisionAsked(row) || restartAsked(row)) return true;
    if (up) return row.status !== 'running';
    // Not running: boot it, unless it failed (a customer start or restart brings it back).
    return row.status !== 'failed';
  }

  /** One pass over one VM: what the table says, for what the VM is now. */
  private async act(row: VmRecord): Promise<Outcome> {
    const action = POLICY[desiredOf(row)][await this.o.driver.actual(row.vm_id)];
    return this.actions[action](row);
  }

  private readonly actions: Record<Action, (row: VmRecord) => Promise<Outcome>> = {
    destroy: (row) => this.destroy(row),
    stop: async (row) => {
      await hostVmStore.setStatus(this.o.db, row.vm_id, 'stopping', PLATFORM_REASONS.has(row.status_reason ?? '') ? row.status_reason : null, ['stopped'], this.o.clock.now());
      return this.actions.markStopped(row);
    },
    markStopped: async (row) => {
      await this.o.driver.halt(row.vm_id);
      await this.endMetering(row.vm_id);
      // A platform stop keeps its reason; a failed VM stays failed.
      await this.transition(row.vm_id, (tx) => hostVmStore.markStopped(tx, row.vm_id, this.o.clock.now()));
      return DONE;
    },
    suspend: (row) => this.suspend(row),
    markSuspended: async (row) => {
      await this.endMetering(row.vm_id);
      await this.transition(row.vm_id, (tx) => hostVmStore.markSuspended(tx, row.vm_id, this.o.clock.now()));
      return DONE;
    },
    failSuspend: async (row) => {
      await this.endMetering(row.vm_id);
      const reason = 'the VM stopped while it was being suspended; its memory was not saved, its disks are kept';
      await this.transition(row.vm_id, (tx) => hostVmStore.markSuspendFailed(tx, row.vm_id, 'failed', reason, this.o.clock.now()));
      return DONE;
    },
    markRunning: async (row) => {
      const ipv4 = this.o.driver.facts(row.vm_id)?.ipv4 ?? null;
      await this.transition(row.vm_id, (tx) => hostVmStore.markRunning(tx, row.vm_id, row.image_id, ipv4, this.o.clock.now()));
      return DONE;
    },
    resume: (row) => this.resume(row),
    boot: (row) => this.boot(row, null),
  };

  private async destroy(row: VmRecord): Promise<Outcome> {
    await this.o.driver.destroy(row.vm_id);
    await hostVmStore.markDisksRemoved(this.o.db, row.vm_id, this.o.clock.now());
    // Its runs' records and output go with it.
    await runStore.deleteOfVm(this.o.db, row.vm_id);
    this.o.log.info({ vm_id: row.vm_id }, 'VM destroyed, disks removed');
    return DONE;
  }

  /**
   * Saves a running VM its customer wants suspended, then records what came of it: suspended when its
   * saved state is complete; running on when saving failed and the guest runs; else failed.
   */
  private async suspend(row: VmRecord): Promise<Outcome> {
    const { driver, clock } = this.o;
    await hostVmStore.setStatus(this.o.db, row.vm_id, 'suspending', null, ['suspending'], clock.now());
    const t0 = performance.now();
    try {
      const saved = await driver.suspend(row.vm_id, { imageId: row.image_id ?? '', vcpus: row.vcpus, memoryMib: row.memory_mib });
      this.o.log.info({ vm_id: row.vm_id, bytes: saved.bytes, suspend_ms: Math.round(performance.now() - t0), ...driver.phases.get(row.vm_id) }, 'VM suspended');
    } catch (err) {
      const reason = `suspend failed: ${(err as Error).message}`.slice(0, 500);
      this.o.log.warn({ vm_id: row.vm_id, reason }, 'suspending a VM failed');
      if (driver.isRunning(row.vm_id)) {
        // The guest runs on as it was.
        await this.transition(row.vm_id, (tx) => hostVmStore.markSuspendFailed(tx, row.vm_id, 'running', reason, clock.now()));
        return DONE;
      }
    }
    return this.actions[(await driver.actual(row.vm_id)) === 'suspended' ? 'markSuspended' : 'failSuspend'](row);
  }

  /** Resumes a suspended VM from its saved memory; when that memory cannot be used, it boots from its disks and says why. */
  private async resume(row: VmRecord): Promise<Outcome> {
    const { driver, clock } = this.o;
    if (!(await this.bootImage(row))) return { done: false, waitingFor: 'the guest image' };
    const image = await this.o.image(row.image_id);
    if (!image) return this.boot(row, 'its saved memory was lost: the image it ran on is gone from its host; booted fresh from its disks');
    const spec = await this.specOf(row, image);
    const t0 = performance.now();
    try {
      const r = await driver.resumeSaved(spec);
      if (!r.resumed) {
        this.o.log.warn({ vm_id: row.vm_id, err: r.damage }, 'the saved memory could not be used; booting fresh');
        return this.boot(row, `its saved memory could not be restored (${r.damage})`.slice(0, 400) + '; booted fresh from its disks');
      }
      await this.transition(row.vm_id, async (tx) => {
        await hostVmStore.markRunning(tx, row.vm_id, image.id, r.up.ipv4, clock.now());
        // Not a boot (booted_at stays), but its idle clock starts again here: the time it was suspended is not idle time.
        await vmStore.touchActivity(tx, row.vm_id, clock.now());
      });
      this.o.log.info({ vm_id: row.vm_id, resume_ms: Math.round(performance.now() - t0), ...driver.phases.get(row.vm_id) }, 'VM resumed from its suspend');
    } catch (err) {
      // Kept for the next start (the saved state is whole; resuming failed for another reason).
      const reason = `resuming failed: ${(err as Error).message}`.slice(0, 500);
      await this.transition(row.vm_id, (tx) => hostVmStore.markBootFailed(tx, row.vm_id, reason, served(row), clock.now()));
      this.o.log.warn({ vm_id: row.vm_id, reason }, 'resuming a VM failed');
    }
    return DONE;
  }

  /** Boots the VM from its disks (a fresh root when a restart or reprovision is asked); `lostMemory`: why its saved memory was not used. */
  private async boot(row: VmRecord, lostMemory: string | null): Promise<Outcome> {
    const { driver, clock } = this.o;
    const image = await this.bootImage(row);
    if (!image) return { done: false, waitingFor: 'the guest image' };
    const [reprovision, restart] = [reprovisionAsked(row), restartAsked(row)];
    const spec = await this.specOf(row, image);
    const t0 = performance.now();
    try {
      const up = await driver.run(spec, { fresh: reprovision || restart });
      const t1 = performance.now();
      await this.transition(row.vm_id, async (tx) => {
        if (up.netSlot !== undefined) await vmStore.setNetSlot(tx, row.vm_id, up.netSlot);
        await hostVmStore.markBooted(tx, row.vm_id, served(row), clock.now());
        await hostVmStore.markRunning(tx, row.vm_id, image.id, up.ipv4, clock.now(), lostMemory);
      });
      const took = { started_from: up.startedFrom, start_ms: Math.round(t1 - t0), marked_ms: Math.round(performance.now() - t1) };
      this.o.log.info({ vm_id: row.vm_id, image_id: image.id, reprovision, restart, ...took, ...driver.phases.get(row.vm_id) }, 'VM running');
    } catch (err) {
      const reason = `boot failed: ${(err as Error).message}`.slice(0, 500);
      await this.transition(row.vm_id, (tx) => hostVmStore.markBootFailed(tx, row.vm_id, reason, served(row), clock.now()));
      await this.endMetering(row.vm_id);
      this.o.log.warn({ vm_id: row.vm_id, reason }, 'VM failed to boot');
    }
    return DONE;
  }

  /** The image a boot of the row uses: the current one for a new or reprovisioned VM, else its own (the current one when its own is gone). */
  private async bootImage(row: VmRecord): Promise<Image | null> {
    const reprovision = reprovisionAsked(row);
    const image = await this.o.image(reprovision || !row.image_id ? this.o.currentImageId() : row.image_id);
    // The VM's own image is gone from this host: it boots on the current one.
    if (!image && !reprovision && row.image_id) return this.o.image(this.o.currentImageId());
    return image;
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

  /** Takes over this host's VMs after a (re)start: leases of earlier processes of this host end, running QEMUs are adopted. */
  async start(): Promise<void> {
    const { db, hostId, driver, log } = this.o;
    await hostVmStore.releaseLeasesOfHost(db, hostId);
    const rows = await hostVmStore.listOnHost(db, hostId);
    const adopted = await driver.takeOver(rows.map((r) => r.vm_id));
    if (adopted) log.info({ adopted }, 're-adopted running VMs');
    if (this.loop.isStopped) return;
    this.meterTimer = setInterval(() => void this.meterAll(), this.o.meterIntervalMs ?? 10_000);
    this.heartbeatTimer = setInterval(
      () => void this.o.hosts.heartbeat(hostId, this.o.currentImageId()).catch(() => undefined),
      this.o.heartbeatMs ?? 15_000,
    );
    this.loop.start();
  }

  /** Stops the loop and waits for actions in flight; the VMs keep running. */
  async stop(): Promise<void> {
    clearInterval(this.meterTimer);
    clearInterval(this.heartbeatTimer);
    await this.loop.stop();
    await this.meterAll();
  }

  /** Runs a pass soon (see ReconcileLoop.kick). */
  kick(): void {
    this.loop.kick();
  }

  /** Something every waiting VM may have waited for has come (the image): retry them now. */
  wake(): void {
    this.loop.wake();
  }

  /** What the VMs of this host that cannot proceed yet are waiting for (readiness reports it). */
  waiting(): Array<{ vm_id: string; waiting_for: string; retry_in_ms: number }> {
    return this.loop.waiting();
  }

  /** Resolves when no VM of this host needs work and nothing is in flight (tests and benchmarks). */
  settled(timeoutMs = 120_000): Promise<void> {
    return this.loop.settled(timeoutMs);
  }

  private async claim(vmId: string): Promise<VmRecord | null> {
    const row = await hostVmStore.claimLease(this.o.db, vmId, {
      hostId: this.o.hostId,
      owner: this.owner,
      expiresAt: new Date(this.o.clock.now().getTime() + (this.o.leaseMs ?? 60_000)),
      now: this.o.clock.now(),
    });
    return row ?? null;
  }

  private async converge(seen: hostVmStore.VmState): Promise<Outcome> {
    const row = await this.claim(seen.vm_id);
    if (!row) return { done: false, waitingFor: 'a lease held by another process' };
    const renew = setInterval(() => void this.claim(row.vm_id).catch(() => undefined), (this.o.leaseMs ?? 60_000) / 3);
    try {
      return await this.act(row);
    } finally {
      clearInterval(renew);
      await hostVmStore.releaseLease(this.o.db, row.vm_id, this.owner);
    }
  }

  /** A QEMU ended without being asked to: the VM says so, and its metering stops. */
  private async recordCrash(vmId: string, reason: string): Promise<void> {
    const now = this.o.clock.now();
    await this.endMetering(vmId);
    let failed = false;
    await this.transition(vmId, async (tx) => {
      failed = await hostVmStore.recordCrash(tx, vmId, `the VM stopped unexpectedly: qemu ${reason}`, now);
    });
    if (failed) this.o.log.warn({ vm_id: vmId, reason }, 'VM crashed');
  }

  /** A status the host observed, written with its event (vm.running, vm.stopped, vm.failed) in one transaction. */
  private async transition(vmId: string, change: (tx: Queryable) => Promise<unknown>): Promise<void> {
    await this.o.db.transaction(async (tx) => {
      const before = await hostVmStore.lock(tx, vmId);
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
      // The tenant's money lock before the VM's row: a draw may stop the tenant's other tier VMs.
      const tenantId = await hostVmStore.tenantOf(tx, vmId);
      if (!tenantId) return;
      await ledgerStore.lockTenant(tx, tenantId);
      const vm = await hostVmStore.lock(tx, vmId);
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
    const vmIds = await hostVmStore.listMeteredOnHost(this.o.db, this.o.hostId).catch(() => [] as string[]);
    for (const vm_id of vmIds) {
      await this.meterOne(vm_id, this.o.driver.isRunning(vm_id)).catch((err) => this.o.log.error({ err, vm_id }, 'metering failed'));
    }
    if (vmIds.length) this.kick();
  }
}
