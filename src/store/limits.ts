/**
 * What the limits of decisions section 14 count, and the operator's overrides of them. Every count is
 * of one tenant (its id in every WHERE); a create counts in its own transaction after lockQuota, so
 * two creates of one tenant never both see room for one.
 */
import type { Queryable } from './db.ts';
import { lockTenant } from './ledger.ts';

/** The operator's overrides of a tenant's limits, by name (a name with no row has its default). */
export async function overrides(q: Queryable, tenantId: string): Promise<Record<string, number>> {
  const rows = await q.query<{ name: string; value: number }>('SELECT name, value FROM tenant_limits WHERE tenant_id = $1', [tenantId]);
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.value)]));
}

/** Sets (a number) or clears (null: back to the default) overrides of a tenant's limits. */
export async function setOverrides(q: Queryable, tenantId: string, changes: Record<string, number | null>, now: Date): Promise<void> {
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) {
      await q.query('DELETE FROM tenant_limits WHERE tenant_id = $1 AND name = $2', [tenantId, name]);
    } else {
      await q.query(
        `INSERT INTO tenant_limits (tenant_id, name, value, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
        [tenantId, name, value, now],
      );
    }
  }
}

/**
 * Serialises the tenant's quota checks until the transaction ends: a transaction-scoped advisory
 * lock on the tenant (not its row, which billing locks for other reasons). Taking it again in the
 * same transaction is free. The tenant's money lock comes first (ledger.ts lockTenant: the store's
 * lock order is the tenant's row, this, then VM rows): a request with an Idempotency-Key takes the
 * tenant's row before its quota check, and one that took the quota first and then the row (a create
 * with no key, its card or credits looked at) deadlocked with it under the chaos test.
 */
export async function lockQuota(q: Queryable, tenantId: string): Promise<void> {
  await lockTenant(q, tenantId);
  await q.query("SELECT pg_advisory_xact_lock(hashtextextended('agentvm.quota.' || $1, 0))", [tenantId]);
}

export interface VmUsage {
  /** VMs not deleted. */
  vms: number;
  /** VMs wanted running (on their way there included) that have not failed. */
  running_vms: number;
  /** Of VMs wanted running or suspended that have not failed. */
  vcpus: number;
  memory_mib: number;
  /** Persist disks of VMs not deleted. */
  disk_gib: number;
}

/** What the tenant's VMs count. A VM's status `failed` holds no CPU or memory; a stopped one holds its disk. */
export async function vmUsage(q: Queryable, tenantId: string): Promise<VmUsage> {
  const [row] = await q.query<VmUsage>(
    `SELECT count(*)::int AS vms,
            count(*) FILTER (WHERE desired_state = 'running' AND status <> 'failed')::int AS running_vms,
            coalesce(sum(vcpus) FILTER (WHERE desired_state IN ('running', 'suspended') AND status <> 'failed'), 0)::int AS vcpus,
            coalesce(sum(memory_mib) FILTER (WHERE desired_state IN ('running', 'suspended') AND status <> 'failed'), 0)::int AS memory_mib,
            coalesce(sum(disk_gib), 0)::int AS disk_gib
     FROM vms WHERE tenant_id = $1 AND deleted_at IS NULL`,
    [tenantId],
  );
  return row;
}

/**
 * The tenant's templates that are, or are becoming, a disk image (a failed capture keeps none), and
 * the disk they take: each its source VM's persist disk size.
 */
export async function templateUsage(q: Queryable, tenantId: string): Promise<{ templates: number; disk_gib: number }> {
  const [row] = await q.query<{ templates: number; disk_gib: number }>(
    `SELECT count(*)::int AS templates, coalesce(sum(v.disk_gib), 0)::int AS disk_gib
     FROM templates t LEFT JOIN vms v ON v.vm_id = t.source_vm_id
     WHERE t.tenant_id = $1 AND t.status <> 'failed'`,
    [tenantId],
  );
  return row;
}

export async function countWebhooks(q: Queryable, tenantId: string): Promise<number> {
  const [row] = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks WHERE tenant_id = $1', [tenantId]);
  return row.n;
}

/** Keys not revoked. */
export async function countKeys(q: Queryable, tenantId: string): Promise<number> {
  const [row] = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL', [tenantId]);
  return row.n;
}

/** Leases of open event streams and shells that have not run out. */
export async function countStreams(q: Queryable, tenantId: string, now: Date): Promise<number> {
  const [row] = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM stream_leases WHERE tenant_id = $1 AND expires_at > $2', [tenantId, now]);
  return row.n;
}

/** Takes a lease; the tenant's leases that ran out go at the same time. */
export async function insertLease(q: Queryable, lease: { lease_id: string; tenant_id: string; kind: 'events' | 'shell'; expires_at: Date }, now: Date): Promise<void> {
  await q.query('DELETE FROM stream_leases WHERE tenant_id = $1 AND expires_at <= $2', [lease.tenant_id, now]);
  await q.query('INSERT INTO stream_leases (lease_id, tenant_id, kind, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
    lease.lease_id,
    lease.tenant_id,
    lease.kind,
    now,
    lease.expires_at,
  ]);
}

/** Moves a lease's end on while it has not run out; false when it has (or was cleared). */
export async function extendLease(q: Queryable, leaseId: string, expiresAt: Date, now: Date): Promise<boolean> {
  const rows = await q.query('UPDATE stream_leases SET expires_at = $2 WHERE lease_id = $1 AND expires_at > $3 RETURNING lease_id', [leaseId, expiresAt, now]);
  return rows.length > 0;
}

export async function endLease(q: Queryable, leaseId: string): Promise<void> {
  await q.query('DELETE FROM stream_leases WHERE lease_id = $1', [leaseId]);
}
