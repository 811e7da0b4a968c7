/**
 * The `vms` table as a VM's host reads and records it: the VMs of the host, their leases, the
 * transitions the host observes (booted, running, suspended, stopped, failed, crashed, disks
 * removed) and the metering of tier VMs. Each goes by VM id: the host and its lease chose the row.
 * store/vms.ts has the customer's reads and requests, platform stops and placement.
 */
import type { Queryable } from './db.ts';
import type { VmRecord } from './vms.ts';
import type { VmStatus } from './vmColumns.ts';

// ---- what the VM's host reads and records ----

/** The VMs a host still has disks for. */
export function listOnHost(q: Queryable, hostId: string): Promise<VmRecord[]> {
  return q.query<VmRecord>('SELECT * FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL', [hostId]);
}

/** What the host's loops look at of each VM of the host: the state it is in and is wanted in. */
export type VmState = Pick<
  VmRecord,
  'vm_id' | 'status' | 'desired_state' | 'restart_requested' | 'restart_done' | 'reprovision_requested' | 'reprovision_done' | 'vcpus'
>;

/**
 * The VMs of a host, as listOnHost, with only their state: the reconciler asks on every change (a
 * burst of 20 creates asked about 40 times) and the metrics sampler every pass, and every column
 * of every row cost PGlite about 2 ms more a time with 40 VMs.
 */
export function listStatesOnHost(q: Queryable, hostId: string): Promise<VmState[]> {
  return q.query<VmState>(
    `SELECT vm_id, status, desired_state, restart_requested, restart_done, reprovision_requested, reprovision_done, vcpus
     FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL`,
    [hostId],
  );
}

/** A VM by id, locked for the rest of the transaction. */
/** The tenant of a VM, read without a lock: what a transaction locks first (store/ledger.ts lockTenant). */
export async function tenantOf(q: Queryable, vmId: string): Promise<string | undefined> {
  const [vm] = await q.query<{ tenant_id: string }>('SELECT tenant_id FROM vms WHERE vm_id = $1', [vmId]);
  return vm?.tenant_id;
}

export async function lock(q: Queryable, vmId: string): Promise<VmRecord | undefined> {
  const [vm] = await q.query<VmRecord>('SELECT * FROM vms WHERE vm_id = $1 FOR UPDATE', [vmId]);
  return vm;
}

/** A host's tier VMs whose running time is being metered. */
export async function listMeteredOnHost(q: Queryable, hostId: string): Promise<string[]> {
  const rows = await q.query<{ vm_id: string }>(
    `SELECT vm_id FROM vms WHERE host_id = $1 AND tier IS NOT NULL AND metered_until IS NOT NULL AND deleted_at IS NULL`,
    [hostId],
  );
  return rows.map((r) => r.vm_id);
}

/** Takes (or renews) the lease on a VM of this host: answers the row, or nothing while another owner holds it. */
export async function claimLease(
  q: Queryable,
  vmId: string,
  lease: { hostId: string; owner: string; expiresAt: Date; now: Date },
): Promise<VmRecord | undefined> {
  const [row] = await q.query<VmRecord>(
    `UPDATE vms SET lease_owner = $2, lease_expires_at = $3
     WHERE vm_id = $1 AND host_id = $4 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < $5)
     RETURNING *`,
    [vmId, lease.owner, lease.expiresAt, lease.hostId, lease.now],
  );
  return row;
}

export async function releaseLease(q: Queryable, vmId: string, owner: string): Promise<void> {
  await q.query('UPDATE vms SET lease_owner = NULL, lease_expires_at = NULL WHERE vm_id = $1 AND lease_owner = $2', [vmId, owner]);
}

/** Ends the leases every earlier process of this host held (their owners are `<host id>:<pid>:<random>`). */
export async function releaseLeasesOfHost(q: Queryable, hostId: string): Promise<void> {
  await q.query(`UPDATE vms SET lease_owner = NULL, lease_expires_at = NULL WHERE host_id = $1 AND lease_owner LIKE $2`, [hostId, `${hostId}:%`]);
}

/** Booted: the restart and reprovision requests it served are acknowledged, and the boot counted. */
export async function markBooted(
  q: Queryable,
  vmId: string,
  served: { restartDone: number; reprovisionDone: number },
  now: Date,
): Promise<void> {
  await q.query(`UPDATE vms SET restart_done = $2, reprovision_done = $3, boots = boots + 1, booted_at = $4 WHERE vm_id = $1`, [
    vmId,
    served.restartDone,
    served.reprovisionDone,
    now,
  ]);
}

/**
 * Running, only while the customer still wants it running; metering of a tier VM starts now if it was
 * not running. `reason`: what the customer should know of this start (its saved memory was lost).
 */
export async function markRunning(q: Queryable, vmId: string, imageId: string | null, ipv4: string | null, now: Date, reason: string | null = null): Promise<void> {
  await q.query(
    `UPDATE vms SET status = 'running', status_reason = $5, image_id = $2, ipv4 = coalesce($3, ipv4), updated_at = $4,
            running_since = CASE WHEN status = 'running' THEN running_since ELSE $4 END,
            metered_until = CASE WHEN tier IS NULL THEN NULL ELSE coalesce(metered_until, $4) END
     WHERE vm_id = $1 AND desired_state = 'running' AND deleted_at IS NULL`,
    [vmId, imageId, ipv4, now, reason],
  );
}

/** Suspended (its memory saved, its QEMU gone), while the customer still wants it so. */
export async function markSuspended(q: Queryable, vmId: string, now: Date): Promise<void> {
  await q.query(`UPDATE vms SET status = 'suspended', status_reason = NULL, updated_at = $2 WHERE vm_id = $1 AND desired_state = 'suspended'`, [vmId, now]);
}

/**
 * A suspend that could not be done: the VM is wanted running again and shows why, `running` when its
 * guest runs on, `failed` when it is gone (a start brings it back from its disks).
 */
export async function markSuspendFailed(q: Queryable, vmId: string, status: 'running' | 'failed', reason: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE vms SET desired_state = 'running', status = $2, status_reason = $3, updated_at = $4
     WHERE vm_id = $1 AND desired_state = 'suspended'`,
    [vmId, status, reason, now],
  );
}

/** A status the host observes (stopping), unless the VM already shows one of `unless`. */
export async function setStatus(q: Queryable, vmId: string, status: VmStatus, reason: string | null, unless: VmStatus[], now: Date): Promise<void> {
  await q.query(`UPDATE vms SET status = $2, status_reason = $3, updated_at = $4 WHERE vm_id = $1 AND NOT (status = ANY($5::text[]))`, [
    vmId,
    status,
    reason,
    now,
    unless,
  ]);
}

/** Stopped, while the customer still wants it stopped; a platform stop keeps its reason, a failed VM stays failed. */
export async function markStopped(q: Queryable, vmId: string, now: Date): Promise<void> {
  await q.query(`UPDATE vms SET status = 'stopped', updated_at = $2 WHERE vm_id = $1 AND desired_state = 'stopped' AND status <> 'failed'`, [
    vmId,
    now,
  ]);
}

/** The boot failed: the VM shows why, and the requests it tried to serve are acknowledged (not retried). */
export async function markBootFailed(
  q: Queryable,
  vmId: string,
  reason: string,
  served: { restartDone: number; reprovisionDone: number },
  now: Date,
): Promise<void> {
  await q.query(
    `UPDATE vms SET status = 'failed', status_reason = $2, restart_done = $3, reprovision_done = $4, updated_at = $5
     WHERE vm_id = $1 AND desired_state = 'running'`,
    [vmId, reason, served.restartDone, served.reprovisionDone, now],
  );
}

/**
 * Its QEMU ended unasked while the customer wanted it running: answers whether the VM now shows it
 * failed. A VM already failed keeps the reason it has (a suspend that died under it says so itself).
 */
export async function recordCrash(q: Queryable, vmId: string, reason: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    `UPDATE vms SET status = 'failed', status_reason = $2, updated_at = $3
     WHERE vm_id = $1 AND desired_state = 'running' AND status <> 'failed' AND deleted_at IS NULL RETURNING vm_id`,
    [vmId, reason, now],
  );
  return rows.length > 0;
}

/** A destroyed VM's host removed its disks: its network slot is free again. */
export async function markDisksRemoved(q: Queryable, vmId: string, now: Date): Promise<void> {
  await q.query('UPDATE vms SET disks_removed_at = $2, net_slot = NULL WHERE vm_id = $1', [vmId, now]);
}

// ---- metering of tier VMs ----

/** Running time drawn up to `meteredUntil` (null: the metered interval ended); `unbilledMs` carried to the next draw. */
export async function recordMetered(q: Queryable, vmId: string, unbilledMs: number, meteredUntil: Date | null): Promise<void> {
  await q.query('UPDATE vms SET unbilled_ms = $2, metered_until = $3 WHERE vm_id = $1', [vmId, unbilledMs, meteredUntil]);
}

/**
 * A host back after it was lost from `lostFrom` to `lostUntil`: its tier VMs' watermarks move on by
 * that gap (one before the loss moves by the gap, one inside it to its end). Answers the VMs moved.
 */
export async function forgiveLostTime(q: Queryable, hostId: string, lostFrom: Date, lostUntil: Date): Promise<string[]> {
  const rows = await q.query<{ vm_id: string }>(
    `UPDATE vms SET metered_until = CASE WHEN metered_until < $2 THEN metered_until + ($3::timestamptz - $2::timestamptz) ELSE $3 END
     WHERE host_id = $1 AND metered_until IS NOT NULL RETURNING vm_id`,
    [hostId, lostFrom, lostUntil],
  );
  return rows.map((r) => r.vm_id);
}
