/**
 * Snapshots on this host (decisions section 18): the SnapshotHost the domain calls. A snapshot lives
 * in `<data dir>/vm-snapshots/<snap id>` (src/vmm/branch.ts says what is in it), on the filesystem of
 * the VMs' directories (its files are hard links shared with them). It stays on this host: VMs started
 * from it are placed here, as VMs of an image are placed on the host that holds its layers.
 *
 * A host that starts again fails the snapshots it left `creating` (the server or host stopped in the
 * middle: their work directories go, the reason is kept on the row) and removes directories of
 * snapshots that are no longer kept, so what remains is whole and checked, or nothing.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../store/db.ts';
import * as snapshotStore from '../store/snapshots.ts';
import { hostOfVm } from '../store/internalCredentials.ts';
import type { SnapshotHost } from '../domain/snapshots.ts';
import { DomainError } from '../domain/errors.ts';
import { branchMarkOf, checkSnapshot, prepareFromSnapshot, takeSnapshot, type RunningMachine } from '../vmm/branch.ts';
import { readRecord, suspendFiles } from '../vmm/suspendRecord.ts';

/** What snapshots need of the host's VM driver. */
export interface BranchDriver {
  vmDir(vmId: string): string;
  /** The VM directories on this host. */
  listVmDirs(): Promise<string[]>;
  /** The running VM's machine, for a snapshot, or null when it does not run here. */
  snapshotMachine(vmId: string): RunningMachine | null;
  /** Runs host work that standby VMs give way to. */
  busyWith?<T>(work: () => Promise<T>): Promise<T>;
}

export interface LocalSnapshotsDeps {
  db: Db;
  /** Seals brokered secrets again for VMs branched from a VM (egress/credentials.ts). */
  credentials: { sealedFor(fromVmId: string, toVmIds: string[]): Promise<Record<string, Record<string, string>>> };
  hostId: string;
  dir: string;
  driver: BranchDriver;
  /** Settles once the VMs an earlier process of this host left running are re-adopted. */
  adopted?: () => Promise<void> | undefined;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

const SNAP_ID = /^snap_[A-Za-z0-9]+$/;
/**
 * How old the directory of a VM made from a snapshot may get without its row: made (prepare) just
 * before the transaction that writes the rows, it has none only if the API replica doing it stopped
 * in between; then it goes (a host's start removes such directories too, but hosts run for months).
 */
export const UNCLAIMED_MS = 10 * 60_000;

export class LocalSnapshots implements SnapshotHost {
  /** Snapshots being taken here: one VM is never saved twice at once. */
  private readonly taking = new Set<string>();
  /** The snapshots being taken here, by id (the sweep leaves their work alone). */
  private readonly takingIds = new Set<string>();
  /** Snapshots begun before this are an earlier process's (sweep): those begun since are this one's. */
  private readonly startedAt = new Date();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(private readonly d: LocalSnapshotsDeps) {}

  dirOf(snapshotId: string): string {
    if (!SNAP_ID.test(snapshotId)) throw new Error(`bad snapshot id ${snapshotId}`);
    return path.join(this.d.dir, snapshotId);
  }

  private here(hostId: string): void {
    if (hostId !== this.d.hostId) throw new Error(`the snapshot is on host ${hostId}, not on this one`);
  }

  async take(hostId: string, req: Parameters<SnapshotHost['take']>[1]): Promise<{ size_bytes: number; paused_ms: number }> {
    this.here(hostId);
    // Right after a start, the VMs an earlier process left running are this one's once re-adopted.
    const m = this.d.driver.snapshotMachine(req.vm_id) ?? (await this.d.adopted?.(), this.d.driver.snapshotMachine(req.vm_id));
    if (!m) throw new DomainError('unavailable', `${req.vm_id} is not running on this host`, 'try again once it runs', { 'Retry-After': '5' });
    if (this.taking.has(req.vm_id)) throw new Error(`a snapshot of ${req.vm_id} is being taken already`);
    this.taking.add(req.vm_id);
    this.takingIds.add(req.snapshot_id);
    try {
      const work = () =>
        takeSnapshot(m, {
          vmDir: this.d.driver.vmDir(req.vm_id),
          snapDir: this.dirOf(req.snapshot_id),
          snapshotId: req.snapshot_id,
          machine: { image_id: req.image_id, vcpus: req.vcpus, memory_mib: req.memory_mib },
          runs: req.runs,
          hashed: req.kind !== 'branch',
        });
      const t0 = performance.now();
      const { record, size_bytes, phases } = await (this.d.driver.busyWith ? this.d.driver.busyWith(work) : work()).catch((err: Error) => {
        this.d.log.warn({ vm_id: req.vm_id, snapshot_id: req.snapshot_id, err: err.message }, 'taking a snapshot failed; the VM runs on');
        throw err;
      });
      // An API replica that stopped in the middle failed it at its start: nothing of it is kept.
      if (!(await snapshotStore.isCreating(this.d.db, req.snapshot_id))) {
        await this.discard(hostId, req.snapshot_id);
        throw new Error('the snapshot was given up while it was taken');
      }
      this.d.log.info(
        { vm_id: req.vm_id, snapshot_id: req.snapshot_id, paused_ms: record.paused_ms, size_bytes, memory_kind: record.memory.kind, snapshot_ms: Math.round(performance.now() - t0), ...phases },
        'snapshot taken',
      );
      return { size_bytes, paused_ms: record.paused_ms };
    } finally {
      this.taking.delete(req.vm_id);
      this.takingIds.delete(req.snapshot_id);
    }
  }

  async check(hostId: string, snapshotId: string): Promise<string | null> {
    this.here(hostId);
    return checkSnapshot(this.dirOf(snapshotId));
  }

  /** Only new VMs' directories are made or removed here: a VM that has a row keeps its own. */
  private async noRows(vmIds: string[]): Promise<void> {
    for (const vmId of vmIds) if ((await hostOfVm(this.d.db, vmId)) !== undefined) throw new Error(`${vmId} is a VM already`);
  }

  async prepare(hostId: string, snapshotId: string, vmIds: string[]): Promise<void> {
    this.here(hostId);
    await this.noRows(vmIds);
    const made: string[] = [];
    try {
      for (const vmId of vmIds) {
        await prepareFromSnapshot(this.dirOf(snapshotId), this.d.driver.vmDir(vmId));
        made.push(vmId);
      }
    } catch (err) {
      for (const vmId of made) await rm(this.d.driver.vmDir(vmId), { recursive: true, force: true });
      throw err;
    }
  }

  async sealedSecrets(hostId: string, fromVmId: string, vmIds: string[]): Promise<Record<string, Record<string, string>>> {
    this.here(hostId);
    return this.d.credentials.sealedFor(fromVmId, vmIds);
  }

  /**
   * Removes the directories made for VMs of a branch or a snapshot's start whose rows never came
   * (UNCLAIMED_MS): only one that never ran (its saved memory still marked as the snapshot's), older
   * than that, with no row. Answers how many went.
   */
  async sweepUnclaimed(now = Date.now()): Promise<number> {
    let removed = 0;
    for (const vmId of await this.d.driver.listVmDirs()) {
      const dir = this.d.driver.vmDir(vmId);
      const st = await stat(dir).catch(() => null);
      if (!st || now - st.mtimeMs < UNCLAIMED_MS) continue;
      if (!branchMarkOf(await readRecord(suspendFiles(dir)))) continue;
      if ((await hostOfVm(this.d.db, vmId)) !== undefined) continue;
      this.d.log.warn({ vm_id: vmId }, 'removing the directory of a VM made from a snapshot whose row never came');
      await rm(dir, { recursive: true, force: true });
      removed++;
    }
    return removed;
  }

  /** Sweeps (sweepUnclaimed) every UNCLAIMED_MS until stopped. */
  startSweeping(): void {
    this.sweeper ??= setInterval(() => void this.sweepUnclaimed().catch((err: Error) => this.d.log.warn({ err: err.message }, 'sweeping unclaimed VM directories failed')), UNCLAIMED_MS);
    this.sweeper.unref();
  }

  stopSweeping(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }

  async discard(hostId: string, snapshotId: string): Promise<void> {
    this.here(hostId);
    await rm(`${this.dirOf(snapshotId)}.work`, { recursive: true, force: true });
    await rm(this.dirOf(snapshotId), { recursive: true, force: true });
  }

  async discardVms(hostId: string, _snapshotId: string, vmIds: string[]): Promise<void> {
    this.here(hostId);
    await this.noRows(vmIds);
    for (const vmId of vmIds) await rm(this.d.driver.vmDir(vmId), { recursive: true, force: true });
  }

  /**
   * After a restart of this host: snapshots left `creating` failed (their files go), directories of
   * snapshots no longer kept removed.
   */
  async sweep(): Promise<void> {
    // Only what an earlier process left: a request this one took while it started is its own.
    for (const s of await snapshotStore.listCreating(this.d.db, this.d.hostId, this.startedAt)) {
      await this.discard(this.d.hostId, s.snapshot_id).catch(() => undefined);
      await snapshotStore.markFailed(this.d.db, s.snapshot_id, 'the server or its VM host stopped while the snapshot was being taken; nothing of it was kept');
      this.d.log.warn({ snapshot_id: s.snapshot_id, vm_id: s.vm_id }, 'a snapshot cut short by a restart was failed');
    }
    const kept = await snapshotStore.listKeptIds(this.d.db, this.d.hostId);
    for (const name of await readdir(this.d.dir).catch(() => [] as string[])) {
      const id = name.replace(/\.work$/, '');
      if (SNAP_ID.test(id) && !this.takingIds.has(id) && (name.endsWith('.work') || !kept.has(id))) await rm(path.join(this.d.dir, name), { recursive: true, force: true });
    }
  }
}
