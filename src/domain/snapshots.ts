/**
 * Branching a running VM, and snapshots as resources (decisions section 18).
 *
 * A snapshot is taken on its VM's host (SnapshotHost) with the VM paused for the saving only; it is
 * not done inside a transaction (that would hold the database for the pause): a row `creating` comes
 * first, the host saves, and the row becomes `ready` (or `failed` with a reason, nothing kept). A host
 * that starts again fails the rows it left `creating` and removes their files (host/branching.ts).
 *
 * A branch is a snapshot of kind `branch` whose VMs are made at once: charged like a create, in one
 * transaction that inserts them, all or none. Their directories are made on the host from the
 * snapshot (each a suspended VM whose memory is the snapshot's) before their rows exist, so a
 * reconciler that sees a row finds its VM ready to resume; the branch's own files go once they are
 * made (each VM holds its own links). VMs start on the host that holds the snapshot: snapshots, like
 * images, stay on the host that made them.
 */
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError, invalid, notFound } from './errors.ts';
import { newId } from './ids.ts';
import { onceForKey, requestHash, storedForKey, type StoredResponse } from './idempotency.ts';
import { PLANS, TIERS, planPriceCents, type Cycle, type PlanId, type TierId } from './plans.ts';
import { orderCharge, requireQuota, requireStillWithin } from './limits.ts';
import { freshVmIds, noRoom, SNAPSHOT_HOST } from './vmPlacement.ts';
import { lockQuota } from '../store/limits.ts';
import { recordEvent, recordVmChange } from './events.ts';
import type { BillingService } from './billing.ts';
import type { EgressPolicy } from './egress.ts';
import type { VmService } from './vms.ts';
import { resolveOrder, type VmOrder } from './vmOrder.ts';
import * as snapshotStore from '../store/snapshots.ts';
import * as vmStore from '../store/vms.ts';
import * as runStore from '../store/runs.ts';
import * as egressStore from '../store/egress.ts';
import type { SnapshotRow } from '../store/snapshots.ts';

/** What reaches the host that holds a VM or a snapshot. */
export interface SnapshotHost {
  /**
   * Saves the running VM's memory, devices and disks as the snapshot (the VM runs on); throws when it
   * cannot. A kept snapshot's files are hashed for the checks of later starts; a branch's are not.
   */
  take(hostId: string, req: { vm_id: string; snapshot_id: string; image_id: string; vcpus: number; memory_mib: number; runs: string[]; kind: snapshotStore.SnapshotKind }): Promise<{ size_bytes: number; paused_ms: number }>;
  /** Why the snapshot's files cannot be used, or null when they are whole (size and hash). */
  check(hostId: string, snapshotId: string): Promise<string | null>;
  /** Makes each VM's directory from the snapshot: a suspended VM whose first start resumes it. */
  prepare(hostId: string, snapshotId: string, vmIds: string[]): Promise<void>;
  /** The VM's brokered secrets sealed again for each new VM (by VM, by name); none when the VM is gone. */
  sealedSecrets(hostId: string, fromVmId: string, vmIds: string[]): Promise<Record<string, Record<string, string>>>;
  /** Removes the snapshot's files. */
  discard(hostId: string, snapshotId: string): Promise<void>;
  /** Removes the directories of VMs made from the snapshot that will never run. */
  discardVms(hostId: string, snapshotId: string, vmIds: string[]): Promise<void>;
}

/** The Snapshot object (section 18). */
export interface Snapshot {
  snapshot_id: string;
  vm_id: string;
  name: string;
  size_bytes: number;
  created_at: string;
}

export const presentSnapshot = (s: SnapshotRow): Snapshot => ({
  snapshot_id: s.snapshot_id,
  vm_id: s.vm_id,
  name: s.name,
  size_bytes: s.size_bytes,
  created_at: new Date(s.created_at).toISOString(),
});

/** What a branch or a start of a snapshot asks for. */
export interface StartFromInput {
  count?: number;
  plan?: PlanId;
  cycle?: Cycle;
  tier?: TierId;
  egress?: EgressPolicy;
  auto_stop_after_s?: number | null;
  expires_at?: string | null;
}

export interface BranchResult {
  vm_ids: string[];
  parent_vm_id: string;
  paused_ms: number;
}

const notRunning = (vmId: string, status: string) =>
  new DomainError('vm_not_running', `VM ${vmId} is ${status}: only a running VM can be branched or snapshotted`, status === 'stopped' || status === 'failed' ? 'start it first' : 'wait until it is running');

const noHost = () => new DomainError('unavailable', 'no VM host that can save or start snapshots is attached to this server', 'try again later', { 'Retry-After': '30' });

/** The machine the VMs are: the snapshot's size; a plan or tier of another size is refused. */
function orderFor(input: StartFromInput, machine: { plan: PlanId | null; cycle: Cycle | null; tier: TierId | null; harness: string; vcpus: number; memory_mib: number; disk_gib: number; egress: EgressPolicy }, now: Date): VmOrder {
  const chosen = input.plan || input.tier ? input : machine.tier ? { tier: machine.tier } : { plan: machine.plan ?? 'starter', cycle: machine.cycle ?? 'monthly' };
  const order = resolveOrder({ ...chosen, cycle: input.cycle ?? (chosen as { cycle?: Cycle }).cycle, harness: machine.harness, count: input.count, egress: input.egress, auto_stop_after_s: input.auto_stop_after_s, expires_at: input.expires_at }, now);
  if (order.vcpus !== machine.vcpus || order.memory_mib !== machine.memory_mib || order.disk_gib !== machine.disk_gib) {
    const size = `${machine.vcpus} vCPU, ${machine.memory_mib} MiB, ${machine.disk_gib} GiB`;
    throw invalid(input.plan ? 'plan' : 'tier', `VMs made from a running VM's memory have its size (${size}); ${order.plan ?? order.tier} VMs are ${order.vcpus} vCPU, ${order.memory_mib} MiB, ${order.disk_gib} GiB`);
  }
  return { ...order, egress: order.egress ?? machine.egress };
}

/** How long a snapshot may stay `creating` before it is taken for abandoned (SnapshotService.failAbandoned). */
export const ABANDONED_MS = 3600_000;

export class SnapshotService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly billing: BillingService,
    private readonly vms: VmService,
    private readonly host: SnapshotHost | null,
    /** This API replica's id, on the snapshots it takes (null where the host takes them: one process). */
    private readonly takerId: string | null = null,
  ) {}

  /**
   * At an API replica's start: the snapshots it left being made failed with the reason, their files
   * removed on their hosts (a host that cannot be reached removes them at its own start).
   */
  async failCutShort(): Promise<number> {
    if (!this.takerId) return 0;
    return this.discardFailed(await snapshotStore.failTakenBy(this.db, this.takerId, 'the API replica taking it stopped in the middle; nothing of it was kept'));
  }

  /**
   * Snapshots left `creating` for over ABANDONED_MS (an hour; a snapshot takes seconds to a few
   * minutes): whoever was taking one stopped in the middle and did not come back (a replica or host
   * gone for good; one that comes back fails its own at its start). Failed with the reason, their
   * files removed where their host answers (else at that host's start).
   */
  async failAbandoned(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - ABANDONED_MS);
    return this.discardFailed(await snapshotStore.failAbandoned(this.db, before, 'it was still being made an hour after it began (whoever was taking it stopped); nothing of it was kept'));
  }

  /** Removes the files of snapshots just failed where their host answers (else at its start); answers how many. */
  private async discardFailed(cut: Array<{ snapshot_id: string; host_id: string }>): Promise<number> {
    for (const c of cut) await this.host?.discard(c.host_id, c.snapshot_id).catch(() => undefined);
    return cut.length;
  }

  async list(tenantId: string, limit = 50, after?: string, vmId?: string): Promise<{ data: Snapshot[]; has_more: boolean }> {
    const cursor = after ? await snapshotStore.getForTenant(this.db, tenantId, after) : null;
    if (after && !cursor) throw invalid('after', 'no snapshot of yours has this id');
    const rows = await snapshotStore.listForTenant(this.db, tenantId, limit, cursor?.snapshot_id, vmId);
    return { data: rows.slice(0, limit).map(presentSnapshot), has_more: rows.length > limit };
  }

  async get(tenantId: string, snapshotId: string): Promise<Snapshot> {
    const row = await snapshotStore.getForTenant(this.db, tenantId, snapshotId);
    if (!row) throw notFound('snapshot');
    return presentSnapshot(row);
  }

  /** Deletes a snapshot (409 while a VM made from it has not started yet: it reads its files). */
  async delete(tenantId: string, snapshotId: string): Promise<Snapshot> {
    const row = await this.db.transaction(async (tx) => {
      const s = await snapshotStore.lockForTenant(tx, tenantId, snapshotId);
      if (!s) throw notFound('snapshot');
      const starting = await snapshotStore.startingFrom(tx, snapshotId);
      if (starting > 0) throw new DomainError('conflict', `snapshot ${snapshotId} is in use: ${starting} VM${starting === 1 ? ' is' : 's are'} starting from it`, 'delete it once they are running');
      return snapshotStore.markDeleted(tx, snapshotId, this.clock.now());
    });
    await this.host?.discard(row.host_id, snapshotId).catch(() => undefined);
    return presentSnapshot(row);
  }

  /** Takes a snapshot of a running VM (memory, devices, disks); the VM runs on. */
  async create(tenantId: string, vmId: string, input: { name?: string }): Promise<Snapshot> {
    const taken = await this.take(tenantId, vmId, 'snapshot', input.name);
    const row = await this.db
      .transaction(async (tx) => {
        await lockQuota(tx, tenantId);
        const ready = await snapshotStore.markReady(tx, taken.snapshot_id, taken.size_bytes, taken.paused_ms, this.clock.now());
        if (!ready) throw new Error(`snapshot ${taken.snapshot_id} was no longer being made`);
        // The check before the pause counted its memory; now its files' own size counts (disks' changes
        // too, and other snapshots made meanwhile): over disk_gib, it is not kept.
        await requireStillWithin(tx, tenantId, 'disk_gib', Math.ceil(taken.size_bytes / 1024 ** 3), this.clock.now());
        await recordEvent(tx, tenantId, 'snapshot.created', presentSnapshot(ready), this.clock.now());
        return ready;
      })
      .catch(async (err: unknown) => {
        await snapshotStore.markFailed(this.db, taken.snapshot_id, (err as Error).message).catch(() => undefined);
        await this.host?.discard(taken.row.host_id, taken.snapshot_id).catch(() => undefined);
        throw err;
      });
    return presentSnapshot(row);
  }

  /**
   * The snapshot's row (`creating`), then its files on the host. Answers what it took; on failure the
   * row is failed with the reason and nothing is kept.
   */
  private async take(tenantId: string, vmId: string, kind: snapshotStore.SnapshotKind, name?: string): Promise<{ snapshot_id: string; size_bytes: number; paused_ms: number; row: SnapshotRow }> {
    const host = this.host;
    const snapshotId = newId('snap');
    const now = this.clock.now();
    const { vm, runs } = await this.db.transaction(async (tx) => {
      // The quota lock before the VM's row, in the order a lifecycle call takes them.
      if (kind === 'snapshot') await lockQuota(tx, tenantId);
      const vm = await vmStore.lockForTenant(tx, tenantId, vmId);
      if (!vm) throw notFound('VM');
      if (vm.status !== 'running' || vm.desired_state !== 'running') throw notRunning(vmId, vm.status);
      if (!host || !vm.host_id) throw noHost();
      // A snapshot counts once made; its memory is what it takes at most beside the disks' changes.
      await requireQuota(tx, tenantId, kind === 'snapshot' ? { snapshots: 1, disk_gib: Math.ceil(vm.memory_mib / 1024) } : {}, now);
      await snapshotStore.insert(tx, {
        snapshot_id: snapshotId,
        tenant_id: tenantId,
        vm_id: vmId,
        host_id: vm.host_id,
        name: (name ?? `${vmId} at ${now.toISOString()}`).slice(0, 100),
        kind,
        vcpus: vm.vcpus,
        memory_mib: vm.memory_mib,
        disk_gib: vm.disk_gib,
        harness: vm.harness,
        image_id: vm.image_id,
        root_image_id: vm.root_image_id,
        template_id: vm.template_id,
        egress: vm.egress,
        taken_by: this.takerId,
        created_at: now,
      });
      const runs = (await runStore.unfinishedOfVm(tx, vmId)).filter((r) => r.status === 'running').map((r) => r.run_id);
      return { vm, runs };
    });
    try {
      const out = await host!.take(vm.host_id!, { vm_id: vmId, snapshot_id: snapshotId, image_id: vm.image_id ?? '', vcpus: vm.vcpus, memory_mib: vm.memory_mib, runs, kind });
      const row = (await snapshotStore.get(this.db, snapshotId))!;
      return { snapshot_id: snapshotId, ...out, row };
    } catch (err) {
      const reason = (err as Error).message;
      await snapshotStore.markFailed(this.db, snapshotId, reason);
      await host!.discard(vm.host_id!, snapshotId).catch(() => undefined);
      const now = await vmStore.getForTenant(this.db, tenantId, vmId);
      if (!now || now.status !== 'running') throw notRunning(vmId, now?.status ?? 'deleted');
      // The Error shape's words are the platform's own; the host's (paths, QEMU's words) stay in its log and on the row.
      if (err instanceof DomainError) throw err;
      throw new DomainError('unavailable', `the VM's state could not be saved (snapshot ${snapshotId}; the host logged why)`, 'try again; the VM runs on', { 'Retry-After': '5' });
    }
  }

  /** Branches a running VM into `count` new ones resumed from this instant (money like a create). */
  async branch(tenantId: string, vmId: string, input: StartFromInput, key?: string): Promise<StoredResponse<BranchResult>> {
    const hash = requestHash('branchVM', vmId, input);
    const replay = await storedForKey<BranchResult>(this.db, tenantId, key, 'branchVM', hash);
    if (replay) return replay;
    const parent = await vmStore.getForTenant(this.db, tenantId, vmId);
    if (!parent) throw notFound('VM');
    const order = orderFor(input, { ...parent, egress: parent.egress }, this.clock.now());
    if (parent.status !== 'running') throw notRunning(vmId, parent.status);
    // Money and room looked at first, so a request that would be refused pauses nothing.
    await this.db.transaction((tx) => this.admit(tx, tenantId, order, parent.host_id));
    const taken = await this.take(tenantId, vmId, 'branch');
    const result = await this.startFrom(tenantId, taken.row, order, key, 'branchVM', hash, { parent_vm_id: vmId, paused_ms: taken.paused_ms }).finally(() =>
      // The VMs hold their own links to its files: the branch's own go, whatever happened.
      this.host!.discard(taken.row.host_id, taken.snapshot_id).catch(() => undefined),
    );
    return result as StoredResponse<BranchResult>;
  }

  /**
   * Refuses (quota, money, room) `count` VMs of the running VM's size and pricing made one at a time
   * from a snapshot of it, before any is: E2B's fork asks so, all or none, before it pauses the VM.
   */
  async admitCopies(tenantId: string, vmId: string, count: number, input: StartFromInput = {}): Promise<void> {
    const parent = await vmStore.getForTenant(this.db, tenantId, vmId);
    if (!parent) throw notFound('VM');
    const order = { ...orderFor({ ...input, count: 1 }, { ...parent, egress: parent.egress }, this.clock.now()), count };
    await this.db.transaction((tx) => this.admit(tx, tenantId, order, parent.host_id));
  }

  /** Starts `count` VMs from a snapshot (money like a create); each resumes its instant with an identity of its own. */
  async startVms(tenantId: string, snapshotId: string, input: StartFromInput, key?: string): Promise<StoredResponse<{ vm_ids: string[] }>> {
    const hash = requestHash('createVMFromSnapshot', snapshotId, input);
    const replay = await storedForKey<{ vm_ids: string[] }>(this.db, tenantId, key, 'createVMFromSnapshot', hash);
    if (replay) return replay;
    const snap = await snapshotStore.getForTenant(this.db, tenantId, snapshotId);
    if (!snap) throw notFound('snapshot');
    const order = orderFor(input, await this.machineOf(snap), this.clock.now());
    if (!this.host) throw noHost();
    await this.db.transaction((tx) => this.admit(tx, tenantId, order, snap.host_id));
    const damaged = await this.host.check(snap.host_id, snapshotId);
    // Deleted meanwhile: its files went with it.
    if (damaged && !(await snapshotStore.getForTenant(this.db, tenantId, snapshotId))) throw notFound('snapshot');
    if (damaged) throw new DomainError('conflict', `snapshot ${snapshotId} cannot be started: ${damaged}`, 'take a new snapshot, or delete this one');
    return this.startFrom(tenantId, snap, order, key, 'createVMFromSnapshot', hash, null);
  }

  /** A snapshot's machine, with the plan or tier of the VM it was taken of when that VM is still there. */
  private async machineOf(s: SnapshotRow): Promise<{ plan: PlanId | null; cycle: Cycle | null; tier: TierId | null; harness: string; vcpus: number; memory_mib: number; disk_gib: number; egress: EgressPolicy }> {
    const vm = await vmStore.getForTenant(this.db, s.tenant_id, s.vm_id);
    const sized = Object.entries(PLANS).find(([, p]) => p.vcpus === s.vcpus && p.memory_mib === s.memory_mib && p.disk_gib === s.disk_gib)?.[0] as PlanId | undefined;
    return {
      plan: vm?.plan ?? (vm?.tier ? null : (sized ?? 'starter')),
      cycle: vm?.cycle ?? null,
      tier: vm?.tier ?? null,
      harness: s.harness,
      vcpus: s.vcpus,
      memory_mib: s.memory_mib,
      disk_gib: s.disk_gib,
      egress: s.egress,
    };
  }

  /** Quota, money and room for the VMs (throws the refusal); changes nothing that lasts. */
  private async admit(tx: Queryable, tenantId: string, order: VmOrder, hostId: string | null): Promise<void> {
    await requireQuota(tx, tenantId, orderCharge(order), this.clock.now());
    if (order.tier) await this.billing.requireCredits(tx, tenantId, TIERS[order.tier].cents_per_hour * order.count);
    else await this.billing.requireCard(tx, tenantId);
    if (!hostId) throw noHost();
    // Room too, before a branch pauses its VM (placement checks again as the VMs are made).
    if (!(await this.vms.roomOn(tx, order, hostId))) throw noRoom(order.count, SNAPSHOT_HOST);
  }

  /**
   * The VMs' directories from the snapshot, then, in one transaction, the money (all or none), their
   * rows and events. When the transaction fails their directories go.
   */
  private async startFrom(
    tenantId: string,
    snap: SnapshotRow,
    order: VmOrder,
    key: string | undefined,
    operation: string,
    hash: string,
    branch: { parent_vm_id: string; paused_ms: number } | null,
  ): Promise<StoredResponse<BranchResult | { vm_ids: string[] }>> {
    const ids = await freshVmIds(this.db, order.count);
    await this.host!.prepare(snap.host_id, snap.snapshot_id, ids).catch(async (err) => {
      // A snapshot deleted while this request went on (its files went with it) is not found, not a failure.
      if (!branch && !(await snapshotStore.getForTenant(this.db, tenantId, snap.snapshot_id))) throw notFound('snapshot');
      throw err;
    });
    // Read before the transaction: the host reads with its own connection (one connection on PGlite:
    // inside the transaction it would wait for it for ever).
    const parentVm = branch?.parent_vm_id ?? (await vmStore.getForTenant(this.db, tenantId, snap.vm_id))?.vm_id ?? null;
    const sealed = parentVm ? await this.host!.sealedSecrets(snap.host_id, parentVm, ids).catch(async (err) => {
      await this.host!.discardVms(snap.host_id, snap.snapshot_id, ids).catch(() => undefined);
      throw err;
    }) : {};
    let result: StoredResponse<BranchResult | { vm_ids: string[] }>;
    try {
      result = await this.db.transaction((tx) =>
        onceForKey(tx, tenantId, key, operation, hash, async () => {
          const now = this.clock.now();
          if (branch) {
            if (!(await snapshotStore.markReady(tx, snap.snapshot_id, 0, branch.paused_ms, now))) throw new Error('the branch was no longer being made');
            await snapshotStore.markDeleted(tx, snap.snapshot_id, now);
          } else if (!(await snapshotStore.lockForTenant(tx, tenantId, snap.snapshot_id))) {
            throw notFound('snapshot');
          }
          await requireQuota(tx, tenantId, orderCharge(order), now);
          if (order.tier) await this.billing.requireCredits(tx, tenantId, TIERS[order.tier].cents_per_hour * order.count);
          else await this.billing.requireCard(tx, tenantId);
          const placedIds = await this.vms.insertVms(tx, tenantId, order, snap.template_id, { image_id: snap.root_image_id, host_id: snap.host_id }, {
            ids,
            snapshotId: snap.snapshot_id,
            imageId: snap.image_id,
          });
          if (order.plan && order.cycle) {
            for (const id of placedIds) {
              await this.billing.chargeCard(tx, tenantId, planPriceCents(order.plan, order.cycle), {
                description: `${order.plan} plan VM (${order.cycle}), ${branch ? `branch of ${branch.parent_vm_id}` : `from snapshot ${snap.snapshot_id}`}`,
                vmId: id,
                plan: order.plan,
                cycle: order.cycle,
              });
            }
          }
          // The persist disk's secrets are the VM's; brokered ones are sealed again for each new VM.
          if (parentVm) {
            await vmStore.copySecretNames(tx, parentVm, placedIds);
            for (const id of placedIds) if (Object.keys(sealed[id] ?? {}).length) await egressStore.putBrokered(tx, id, sealed[id]);
          }
          for (const id of placedIds) await recordVmChange(tx, null, id, now);
          if (!branch) return { status: 201, body: { vm_ids: placedIds } };
          const body: BranchResult = { vm_ids: placedIds, parent_vm_id: branch.parent_vm_id, paused_ms: branch.paused_ms };
          await recordEvent(tx, tenantId, 'vm.branched', body, now);
          return { status: 201, body };
        }),
      );
    } catch (err) {
      await this.host!.discardVms(snap.host_id, snap.snapshot_id, ids).catch(() => undefined);
      if (branch) await snapshotStore.markFailed(this.db, snap.snapshot_id, (err as Error).message).catch(() => undefined);
      throw err;
    }
    if (result.replayed) {
      // A retry that ran alongside the request it repeats (the same key): the answer is that one's; this one's branch is over.
      await this.host!.discardVms(snap.host_id, snap.snapshot_id, ids).catch(() => undefined);
      if (branch) await snapshotStore.markFailed(this.db, snap.snapshot_id, 'a retry of a branch made by another request with the same Idempotency-Key').catch(() => undefined);
    } else await this.vms.changed(result.body.vm_ids);
    return result;
  }
}
