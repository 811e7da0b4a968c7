/**
 * Snapshots of running VMs (decisions section 18): one row per snapshot, the tenant id in every
 * customer WHERE. A row is `creating` while its host saves it, `ready` once its files are whole and
 * checked, `failed` with a reason when they never were (nothing of it is left on the host then).
 */
import type { EgressPolicy } from '../net/egressPolicy.ts';
import type { Queryable } from './db.ts';

export type SnapshotKind = 'snapshot' | 'branch';
export type SnapshotStatus = 'creating' | 'ready' | 'failed';

export interface SnapshotRow {
  snapshot_id: string;
  tenant_id: string;
  vm_id: string;
  host_id: string;
  name: string;
  kind: SnapshotKind;
  status: SnapshotStatus;
  status_reason: string | null;
  size_bytes: number;
  paused_ms: number | null;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  harness: string;
  image_id: string | null;
  root_image_id: string | null;
  template_id: string | null;
  egress: EgressPolicy;
  /** The API replica taking it while `creating` (null: its host). */
  taken_by: string | null;
  created_at: Date;
  ready_at: Date | null;
  deleted_at: Date | null;
}

export type NewSnapshot = Omit<SnapshotRow, 'status' | 'status_reason' | 'size_bytes' | 'paused_ms' | 'ready_at' | 'deleted_at'>;

const fix = (r: SnapshotRow): SnapshotRow => ({ ...r, size_bytes: Number(r.size_bytes) });

export async function insert(q: Queryable, s: NewSnapshot): Promise<void> {
  await q.query(
    `INSERT INTO snapshots (snapshot_id, tenant_id, vm_id, host_id, name, kind, status, vcpus, memory_mib, disk_gib, harness,
                            image_id, root_image_id, template_id, egress, created_at, taken_by)
     VALUES ($1, $2, $3, $4, $5, $6, 'creating', $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
    [s.snapshot_id, s.tenant_id, s.vm_id, s.host_id, s.name, s.kind, s.vcpus, s.memory_mib, s.disk_gib, s.harness,
      s.image_id, s.root_image_id, s.template_id, JSON.stringify(s.egress), s.created_at, s.taken_by],
  );
}

export async function markReady(q: Queryable, snapshotId: string, sizeBytes: number, pausedMs: number, now: Date): Promise<SnapshotRow | null> {
  const [row] = await q.query<SnapshotRow>(
    `UPDATE snapshots SET status = 'ready', size_bytes = $2, paused_ms = $3, ready_at = $4
     WHERE snapshot_id = $1 AND status = 'creating' RETURNING *`,
    [snapshotId, sizeBytes, pausedMs, now],
  );
  return row ? fix(row) : null;
}

/** The snapshot could not be made: kept as a row (its reason) with nothing on its host. */
export async function markFailed(q: Queryable, snapshotId: string, reason: string): Promise<void> {
  await q.query(`UPDATE snapshots SET status = 'failed', status_reason = $2 WHERE snapshot_id = $1 AND status = 'creating'`, [snapshotId, reason.slice(0, 500)]);
}

/**
 * Snapshots of a host still `creating` that the host itself began taking before `before` (a host that
 * starts again fails them: it was stopped in the middle); those an API replica takes are the
 * replica's (failTakenBy).
 */
export async function listCreating(q: Queryable, hostId: string, before: Date): Promise<SnapshotRow[]> {
  return (
    await q.query<SnapshotRow>(`SELECT * FROM snapshots WHERE host_id = $1 AND status = 'creating' AND taken_by IS NULL AND created_at < $2`, [hostId, before])
  ).map(fix);
}

/** Fails the snapshots an API replica left `creating` (it starts again); answers them. */
export async function failTakenBy(q: Queryable, takerId: string, reason: string): Promise<Array<{ snapshot_id: string; host_id: string }>> {
  return q.query<{ snapshot_id: string; host_id: string }>(
    `UPDATE snapshots SET status = 'failed', status_reason = $2 WHERE taken_by = $1 AND status = 'creating' RETURNING snapshot_id, host_id`,
    [takerId, reason],
  );
}

/**
 * Fails the snapshots still `creating` that were begun before `before`, whoever was taking them (a
 * replica or a host that stopped in the middle and never came back); answers them.
 */
export async function failAbandoned(q: Queryable, before: Date, reason: string): Promise<Array<{ snapshot_id: string; host_id: string }>> {
  return q.query<{ snapshot_id: string; host_id: string }>(
    `UPDATE snapshots SET status = 'failed', status_reason = $2 WHERE status = 'creating' AND created_at < $1 RETURNING snapshot_id, host_id`,
    [before, reason],
  );
}

/** Whether the snapshot is still being made (not given up by whoever was taking it). */
export async function isCreating(q: Queryable, snapshotId: string): Promise<boolean> {
  return (await q.query(`SELECT 1 FROM snapshots WHERE snapshot_id = $1 AND status = 'creating'`, [snapshotId])).length > 0;
}

/** Snapshots of a host whose files must stay (ready, or being made, not deleted). */
export async function listKeptIds(q: Queryable, hostId: string): Promise<Set<string>> {
  const rows = await q.query<{ snapshot_id: string }>(
    `SELECT snapshot_id FROM snapshots WHERE host_id = $1 AND deleted_at IS NULL AND status <> 'failed'`,
    [hostId],
  );
  return new Set(rows.map((r) => r.snapshot_id));
}

export async function getForTenant(q: Queryable, tenantId: string, snapshotId: string): Promise<SnapshotRow | null> {
  const [row] = await q.query<SnapshotRow>(
    `SELECT * FROM snapshots WHERE tenant_id = $1 AND snapshot_id = $2 AND kind = 'snapshot' AND status = 'ready' AND deleted_at IS NULL`,
    [tenantId, snapshotId],
  );
  return row ? fix(row) : null;
}

/** Locks a tenant's ready snapshot (a delete against a start). */
export async function lockForTenant(q: Queryable, tenantId: string, snapshotId: string): Promise<SnapshotRow | null> {
  const [row] = await q.query<SnapshotRow>(
    `SELECT * FROM snapshots WHERE tenant_id = $1 AND snapshot_id = $2 AND kind = 'snapshot' AND status = 'ready' AND deleted_at IS NULL FOR UPDATE`,
    [tenantId, snapshotId],
  );
  return row ? fix(row) : null;
}

export async function get(q: Queryable, snapshotId: string): Promise<SnapshotRow | null> {
  const [row] = await q.query<SnapshotRow>('SELECT * FROM snapshots WHERE snapshot_id = $1', [snapshotId]);
  return row ? fix(row) : null;
}

/**
 * A tenant's ready snapshots, newest first, one more than `limit` (has_more), after the snapshot
 * `afterId` when given (compared with its row as stored: a JavaScript Date would drop the microseconds).
 */
/** A page of a tenant's ready snapshots, newest first (of one VM, when `vmId` is given); one more than `limit` tells whether more follow. */
export async function listForTenant(q: Queryable, tenantId: string, limit: number, afterId?: string, vmId?: string): Promise<SnapshotRow[]> {
  const params: unknown[] = [tenantId, limit + 1];
  const where = [`tenant_id = $1`, `kind = 'snapshot'`, `status = 'ready'`, `deleted_at IS NULL`];
  if (afterId) where.push(`(created_at, snapshot_id) < (SELECT created_at, snapshot_id FROM snapshots WHERE snapshot_id = $${params.push(afterId)})`);
  if (vmId) where.push(`vm_id = $${params.push(vmId)}`);
  const rows = await q.query<SnapshotRow>(`SELECT * FROM snapshots WHERE ${where.join(' AND ')} ORDER BY created_at DESC, snapshot_id DESC LIMIT $2`, params);
  return rows.map(fix);
}

export async function markDeleted(q: Queryable, snapshotId: string, now: Date): Promise<SnapshotRow> {
  const [row] = await q.query<SnapshotRow>('UPDATE snapshots SET deleted_at = $2 WHERE snapshot_id = $1 RETURNING *', [snapshotId, now]);
  return fix(row);
}

/**
 * VMs started from the snapshot that are starting and have never run (their first start reads its
 * files). A first start is a resume, which sets no `booted_at`: `running_since` says it ran; a VM of
 * it stopped or suspended since is not starting from it.
 */
export async function startingFrom(q: Queryable, snapshotId: string): Promise<number> {
  const [row] = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM vms WHERE snapshot_id = $1 AND deleted_at IS NULL AND booted_at IS NULL AND running_since IS NULL AND status IN ('provisioning', 'starting')`,
    [snapshotId],
  );
  return row.n;
}

/** What a tenant's snapshots count (section 14): snapshots listed, and the disk of every one kept. */
export async function usage(q: Queryable, tenantId: string): Promise<{ snapshots: number; bytes: number }> {
  const [row] = await q.query<{ snapshots: number; bytes: string }>(
    `SELECT count(*) FILTER (WHERE kind = 'snapshot')::int AS snapshots, coalesce(sum(size_bytes), 0)::bigint AS bytes
     FROM snapshots WHERE tenant_id = $1 AND deleted_at IS NULL AND status <> 'failed'`,
    [tenantId],
  );
  return { snapshots: row.snapshots, bytes: Number(row.bytes) };
}

/** Disk the snapshots kept on a host take, in GiB (placement counts it). */
export async function hostDiskGib(q: Queryable, hostId: string): Promise<number> {
  const [row] = await q.query<{ bytes: string }>(
    `SELECT coalesce(sum(size_bytes), 0)::bigint AS bytes FROM snapshots WHERE host_id = $1 AND deleted_at IS NULL AND status <> 'failed'`,
    [hostId],
  );
  return Number(row.bytes) / 1024 ** 3;
}
