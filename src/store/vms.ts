/**
 * The `vms` table: every statement on it, one function each, named for what it does to a VM. Each
 * takes the database or the transaction it runs in. A customer's read or change carries the tenant
 * id in its WHERE; the host's own transitions go by VM id (its host and lease chose the row).
 */
import type { Queryable } from './db.ts';
import type { EgressPolicy } from '../net/egressPolicy.ts';
import { STANDBY_SLOTS } from '../net/slots.ts';
import type { Cycle, PlanId, TierId, VmStateFields, VmStatus } from './vmColumns.ts';

/** A VM as the customer sees it. */
export interface VmRow extends VmStateFields {
  vm_id: string;
  tenant_id: string;
  host_id: string | null;
  plan: PlanId | null;
  cycle: Cycle | null;
  tier: TierId | null;
  harness: string;
  template_id: string | null;
  /** The image its root starts from (img_…); null: base. */
  root_image_id: string | null;
  ipv4: string | null;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  secret_names: string[];
  /** The secrets the platform keeps for the gateway (a subset of secret_names). */
  brokered_secret_names: string[];
  egress: EgressPolicy;
  /** How often the VM has booted: a run whose VM booted again under it lost its guest. */
  boots: number;
  /** Stopped (status_reason `idle`) after this many seconds without activity; null: never. */
  auto_stop_after_s: number | null;
  /** A preview request starts the VM when it is suspended (migration 018). */
  auto_resume?: boolean;
  /** The Host its apps get through its previews (migration 026; E2B's maskRequestHost). */
  preview_host?: string | null;
  /** Destroyed (status_reason `expired`) at this time; null: never. */
  expires_at: Date | null;
  /** The last activity that leaves no row of its own (an open shell touches it); runs and egress are read from their tables. */
  last_activity_at: Date | null;
  /** What the VM has cost since the month began (ledger), where the service has added it. */
  cost_cents_month?: number;
  created_at: Date;
  updated_at: Date;
}

/** The whole row: what the VM's host works from (requests acknowledged, image, network, metering, lease). */
export interface VmRecord extends VmRow {
  reprovision_done: number;
  restart_done: number;
  image_id: string | null;
  net_slot: number | null;
  unbilled_ms: number;
  metered_until: Date | null;
  lease_owner: string | null;
  disks_removed_at: Date | null;
  deleted_at: Date | null;
}

/** A new VM's row: placed on a host, wanted running, not yet booted. */
export interface NewVm {
  vm_id: string;
  tenant_id: string;
  host_id: string;
  plan: PlanId | null;
  cycle: Cycle | null;
  tier: TierId | null;
  harness: string;
  template_id: string | null;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  image_id: string | null;
  root_image_id?: string | null;
  /** The snapshot it starts from (a branch, or a start of a snapshot): its first start resumes that memory. */
  snapshot_id?: string | null;
  net_slot: number;
  egress: EgressPolicy;
  auto_stop_after_s: number | null;
  expires_at: Date | null;
  created_at: Date;
}

/** Why the platform, not the customer, stopped a VM; the reason stays on the VM until it runs again. */
export type PlatformStopReason = 'preempted' | 'credits_exhausted' | 'idle';
export const PLATFORM_STOP_REASONS: readonly PlatformStopReason[] = ['preempted', 'credits_exhausted', 'idle'];

/**
 * The last network slot placement hands out (10.128.0.0/9 in /24s): the slots above it are standby
 * VMs' (STANDBY_SLOTS), and a VM that takes a standby takes its slot (setNetSlot).
 */
const NET_SLOTS = STANDBY_SLOTS.first - 1;

// ---- what the customer reads and asks for (tenant id in every WHERE) ----

export function listForTenant(q: Queryable, tenantId: string): Promise<VmRow[]> {
  return q.query<VmRow>('SELECT * FROM vms WHERE tenant_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, vm_id DESC', [tenantId]);
}

export async function getForTenant(q: Queryable, tenantId: string, vmId: string): Promise<VmRow | undefined> {
  const [vm] = await q.query<VmRow>('SELECT * FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL', [tenantId, vmId]);
  return vm;
}

/**
 * The VM (not deleted) whose preview label is `label`, the tenant's when one is given (migration 018's
 * index); none when two ids share it (they differ in case alone).
 */
export async function byLabel(q: Queryable, label: string, tenantId: string | null): Promise<{ vm_id: string; tenant_id: string } | null> {
  const rows = await q.query<{ vm_id: string; tenant_id: string }>(
    `SELECT vm_id, tenant_id FROM vms WHERE lower(replace(vm_id, '_', '-')) = $1 AND deleted_at IS NULL ${tenantId ? 'AND tenant_id = $2' : ''} LIMIT 2`,
    tenantId ? [label, tenantId] : [label],
  );
  return rows.length === 1 ? rows[0] : null;
}

/** Where the tenant's VM stands, and nothing more (a wait looks at it every time it hears of the VM). */
export async function stateForTenant(q: Queryable, tenantId: string, vmId: string): Promise<{ status: string; desired_state: string } | undefined> {
  const [vm] = await q.query<{ status: string; desired_state: string }>(
    'SELECT status, desired_state FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL',
    [tenantId, vmId],
  );
  return vm;
}

/** The tenant's VM, locked for the rest of the transaction. */
export async function lockForTenant(q: Queryable, tenantId: string, vmId: string): Promise<VmRecord | undefined> {
  const [vm] = await q.query<VmRecord>('SELECT * FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL FOR UPDATE', [
    tenantId,
    vmId,
  ]);
  return vm;
}

/** The tenant's VM, locked, with what a capture of its persist disk needs. */
export async function lockForCapture(
  q: Queryable,
  tenantId: string,
  vmId: string,
): Promise<{ vm_id: string; status: string; harness: string; plan: string | null; disk_gib: number } | undefined> {
  const [vm] = await q.query<{ vm_id: string; status: string; harness: string; plan: string | null; disk_gib: number }>(
    'SELECT vm_id, status, harness, plan, disk_gib FROM vms WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL FOR UPDATE',
    [tenantId, vmId],
  );
  return vm;
}

/** The tenant's live VMs counted by status and by what they are billed as. */
export function tallyForTenant(
  q: Queryable,
  tenantId: string,
): Promise<Array<{ status: string; plan: PlanId | null; cycle: Cycle | null; tier: string | null; n: number }>> {
  return q.query(
    `SELECT status, plan, cycle, tier, count(*)::int AS n FROM vms
     WHERE tenant_id = $1 AND deleted_at IS NULL GROUP BY status, plan, cycle, tier`,
    [tenantId],
  );
}

/** Whether a live VM has the preview label this id would have (its id lowercased, `_` as `-`). */
export async function labelTaken(q: Queryable, vmId: string): Promise<boolean> {
  const rows = await q.query("SELECT 1 FROM vms WHERE lower(replace(vm_id, '_', '-')) = lower(replace($1, '_', '-')) AND deleted_at IS NULL", [vmId]);
  return rows.length > 0;
}

export async function insert(q: Queryable, vm: NewVm): Promise<void> {
  await q.query(
    `INSERT INTO vms (vm_id, tenant_id, host_id, plan, cycle, tier, harness, template_id, vcpus, memory_mib, disk_gib,
                      status, desired_state, image_id, net_slot, egress, auto_stop_after_s, expires_at, created_at, updated_at, root_image_id, snapshot_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'provisioning', 'running', $12, $13, $14, $15, $16, $17, $17, $18, $19)`,
    [vm.vm_id, vm.tenant_id, vm.host_id, vm.plan, vm.cycle, vm.tier, vm.harness, vm.template_id, vm.vcpus,
      vm.memory_mib, vm.disk_gib, vm.image_id, vm.net_slot, JSON.stringify(vm.egress), vm.auto_stop_after_s, vm.expires_at, vm.created_at, vm.root_image_id ?? null,
      vm.snapshot_id ?? null],
  );
}

/** VMs branched from another have its secrets (on the persist disk, and brokered ones sealed again): their names too. */
export async function copySecretNames(q: Queryable, fromVmId: string, toVmIds: string[]): Promise<void> {
  await q.query(
    `UPDATE vms SET secret_names = p.secret_names, brokered_secret_names = p.brokered_secret_names
     FROM vms p WHERE p.vm_id = $1 AND vms.vm_id = ANY($2::text[])`,
    [fromVmId, toVmIds],
  );
}

/** A lifecycle request (stop, start, restart, reprovision): the state it asks for and the status it shows. */
export async function recordLifecycle(q: Queryable, tenantId: string, vmId: string, state: VmStateFields, now: Date): Promise<VmRow> {
  const [updated] = await q.query<VmRow>(
    `UPDATE vms SET status = $3, status_reason = $4, desired_state = $5, restart_requested = $6,
                    reprovision_requested = $7, updated_at = $8
     WHERE tenant_id = $1 AND vm_id = $2 RETURNING *`,
    [tenantId, vmId, state.status, state.status_reason, state.desired_state, state.restart_requested, state.reprovision_requested, now],
  );
  return updated;
}

/**
 * Destroyed: gone from the API at once; its host removes the disks. `reason` is set when the platform
 * destroyed it (`expired`). Call with the row locked.
 */
export async function markDeleted(q: Queryable, vmId: string, now: Date, reason: string | null = null): Promise<VmRow> {
  const [updated] = await q.query<VmRow>(
    `UPDATE vms SET desired_state = 'deleted', status = 'deleted', status_reason = $3, deleted_at = $2, updated_at = $2
     WHERE vm_id = $1 RETURNING *`,
    [vmId, now, reason],
  );
  return updated;
}

/** The customer's idle-stop and expiry settings (a field left undefined keeps its value; null clears it). */
export async function setTimers(
  q: Queryable,
  tenantId: string,
  vmId: string,
  timers: { auto_stop_after_s?: number | null; expires_at?: Date | null },
  now: Date,
): Promise<VmRow | undefined> {
  const [row] = await q.query<VmRow>(
    `UPDATE vms SET auto_stop_after_s = CASE WHEN $3 THEN $4::integer ELSE auto_stop_after_s END,
                    expires_at = CASE WHEN $5 THEN $6::timestamptz ELSE expires_at END,
                    -- The idle clock starts again when the setting changes.
                    last_activity_at = CASE WHEN $3 THEN greatest(last_activity_at, $7) ELSE last_activity_at END,
                    updated_at = $7
     WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL RETURNING *`,
    [tenantId, vmId, timers.auto_stop_after_s !== undefined, timers.auto_stop_after_s ?? null, timers.expires_at !== undefined, timers.expires_at ?? null, now],
  );
  return row;
}

/** Activity that leaves no row of its own (an open shell): the VM is not idle until `auto_stop_after_s` after now. */
export async function touchActivity(q: Queryable, vmId: string, now: Date): Promise<void> {
  await q.query('UPDATE vms SET last_activity_at = greatest(last_activity_at, $2) WHERE vm_id = $1', [vmId, now]);
}

/**
 * Stops every running VM idle for its `auto_stop_after_s`: since its boot, the last touch of
 * last_activity_at, the end of its last run and its last egress connection, with no run queued or
 * running. One statement: whichever process runs it first stops each VM once. Answers the VMs stopped.
 */
export async function stopIdle(q: Queryable, now: Date): Promise<Array<{ vm_id: string; tenant_id: string; host_id: string | null }>> {
  return q.query(
    `UPDATE vms v SET desired_state = 'stopped', status = 'stopping', status_reason = 'idle', updated_at = $1
     WHERE v.auto_stop_after_s IS NOT NULL AND v.deleted_at IS NULL AND v.desired_state = 'running' AND v.status = 'running'
       AND greatest(v.created_at, v.booted_at, v.last_activity_at) <= $1::timestamptz - make_interval(secs => v.auto_stop_after_s)
       AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.vm_id = v.vm_id
                       AND (r.status IN ('queued', 'running') OR r.finished_at > $1::timestamptz - make_interval(secs => v.auto_stop_after_s)))
       AND NOT EXISTS (SELECT 1 FROM egress_log e WHERE e.vm_id = v.vm_id AND e.at > $1::timestamptz - make_interval(secs => v.auto_stop_after_s))
     RETURNING v.vm_id, v.tenant_id, v.host_id`,
    [now],
  );
}

/** VMs whose expiry has come, not yet destroyed. */
export function listExpired(q: Queryable, now: Date, limit: number): Promise<{ vm_id: string; tenant_id: string }[]> {
  return q.query<{ vm_id: string; tenant_id: string }>(
    'SELECT vm_id, tenant_id FROM vms WHERE expires_at <= $1 AND deleted_at IS NULL ORDER BY expires_at LIMIT $2',
    [now, limit],
  );
}

/** The soonest expiry of a VM not yet destroyed, if any. */
export async function nextExpiry(q: Queryable): Promise<Date | null> {
  const [r] = await q.query<{ at: Date | string | null }>('SELECT min(expires_at) AS at FROM vms WHERE deleted_at IS NULL', []);
  return r?.at ? new Date(r.at) : null;
}

/** An expired VM locked for its destruction; undefined when another process has it or it is gone already. */
export async function lockExpired(q: Queryable, vmId: string, now: Date): Promise<VmRecord | undefined> {
  const [vm] = await q.query<VmRecord>(
    'SELECT * FROM vms WHERE vm_id = $1 AND expires_at <= $2 AND deleted_at IS NULL FOR UPDATE SKIP LOCKED',
    [vmId, now],
  );
  return vm;
}

/** The names the VM lists: its guest's secrets and the brokered ones. */
export async function setSecretNames(q: Queryable, tenantId: string, vmId: string, guest: string[], brokered: string[], now: Date): Promise<VmRow> {
  const [row] = await q.query<VmRow>(
    `UPDATE vms SET secret_names = $3, brokered_secret_names = $4, updated_at = $5
     WHERE tenant_id = $1 AND vm_id = $2 RETURNING *`,
    [tenantId, vmId, [...new Set([...guest, ...brokered])].sort(), [...brokered].sort(), now],
  );
  return row;
}


/** The customer's policy change (call with the VM locked or in its own statement). */
export async function setEgress(q: Queryable, tenantId: string, vmId: string, policy: EgressPolicy, now: Date): Promise<VmRow> {
  const [row] = await q.query<VmRow>('UPDATE vms SET egress = $3, updated_at = $4 WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL RETURNING *', [
    tenantId,
    vmId,
    JSON.stringify(policy),
    now,
  ]);
  return row;
}


/** The harness a VM runs (its host decides which of its secrets are brokered); undefined for no such VM. */
export async function harnessOf(q: Queryable, vmId: string): Promise<string | undefined> {
  const [row] = await q.query<{ harness: string }>('SELECT harness FROM vms WHERE vm_id = $1', [vmId]);
  return row?.harness;
}

/** What the gateway applies to a VM's next connection; null for a VM that is gone. */
export async function egressOf(q: Queryable, vmId: string): Promise<EgressPolicy | null> {
  const [row] = await q.query<{ egress: EgressPolicy }>('SELECT egress FROM vms WHERE vm_id = $1 AND deleted_at IS NULL', [vmId]);
  return row?.egress ?? null;
}


// ---- platform stops: the customer wanted the VM running, the platform stops it and says why ----

/** One UPDATE for every platform stop; a VM already stopped or failed keeps its status. */
const platformStop = (where: string) =>
  `UPDATE vms SET desired_state = 'stopped', status = CASE WHEN status IN ('stopped', 'failed') THEN status ELSE 'stopping' END,
          status_reason = $3, updated_at = $2
   WHERE ${where} RETURNING vm_id`;

/** Spot VMs stopped to make room for a VM that is not spot (call with their host locked). */
export async function preempt(q: Queryable, vmIds: string[], now: Date): Promise<void> {
  await q.query(platformStop('vm_id = ANY($1::text[])'), [vmIds, now, 'preempted' satisfies PlatformStopReason]);
}

/** The tenant's prepaid credits are gone: every tier VM it wants running stops (none is deleted). Answers how many. */
export async function stopTierVmsOfTenant(q: Queryable, tenantId: string, now: Date): Promise<number> {
  const rows = await q.query(platformStop(`tenant_id = $1 AND tier IS NOT NULL AND deleted_at IS NULL AND desired_state = 'running'`), [
    tenantId,
    now,
    'credits_exhausted' satisfies PlatformStopReason,
  ]);
  return rows.length;
}

// ---- placement on a host (call with the host locked) ----

/**
 * The VMs that hold room on a host (disk while they exist, CPU and memory while wanted running; a
 * suspended one's saved memory is on disk), newest first.
 */
export function listHoldingRoom(
  q: Queryable,
  hostId: string,
): Promise<Array<{ vm_id: string; vcpus: number; memory_mib: number; disk_gib: number; running: boolean; suspended: boolean; spot: boolean }>> {
  return q.query(
    `SELECT vm_id, vcpus, memory_mib, disk_gib, desired_state = 'running' AS running, desired_state = 'suspended' AS suspended, tier = 'spot' AS spot
     FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL AND desired_state <> 'deleted'
     ORDER BY created_at DESC`,
    [hostId],
  );
}

/**
 * The `count` lowest network slots free on a host: the gaps between the slots held (from 0 to
 * NET_SLOTS), each counted out only as far as `count`. Each create asks (a burst of 20 asks 20
 * times), and listing all 24,576 slots to drop the held ones cost PGlite about 7 ms a time.
 */
export async function freeNetSlots(q: Queryable, hostId: string, count: number): Promise<number[]> {
  const rows = await q.query<{ s: number }>(
    `WITH held AS (
       SELECT -1 AS s
       UNION ALL
       SELECT net_slot FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL AND net_slot BETWEEN 0 AND ${NET_SLOTS}
     ), gaps AS (
       SELECT s + 1 AS lo, coalesce(lead(s) OVER (ORDER BY s), ${NET_SLOTS + 1}) - 1 AS hi FROM held
     )
     SELECT lo + k AS s FROM gaps, generate_series(0, least(hi - lo, $2 - 1)) AS k
     WHERE hi >= lo
     ORDER BY s LIMIT $2`,
    [hostId, count],
  );
  return rows.map((r) => r.s);
}

/** Network slots of the standby range held by VMs of a host (they took standbys). */
export async function heldStandbySlots(q: Queryable, hostId: string): Promise<Set<number>> {
  const rows = await q.query<{ s: number }>(
    `SELECT net_slot AS s FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL AND net_slot >= $2`,
    [hostId, STANDBY_SLOTS.first],
  );
  return new Set(rows.map((r) => r.s));
}

/** The VM took a standby, and with it the standby's network slot. */
export async function setNetSlot(q: Queryable, vmId: string, slot: number): Promise<void> {
  await q.query('UPDATE vms SET net_slot = $2 WHERE vm_id = $1', [vmId, slot]);
}
