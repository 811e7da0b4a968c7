/**
 * The `hosts` table: a VM host's capacity row, its heartbeat, draining and loss; and where an API
 * replica reaches the host of a VM or of a template's source VM. Each function takes the database
 * or the transaction it runs in. A host is live while its heartbeat is newer than `since`.
 */
import type { Queryable } from './db.ts';

export interface HostCapacity {
  vcpus_total: number;
  memory_mib_total: number;
  disk_gib_total: number;
}

export interface HostRow extends HostCapacity {
  host_id: string;
  name: string;
  accel: string | null;
  draining: boolean;
  heartbeat_at: Date | null;
  image_id: string | null;
}

/** What a host says of itself when it starts; `internal_url` is where API replicas reach it (null: not served). */
export interface HostRegistration extends HostCapacity {
  host_id: string;
  name: string;
  accel: string;
  image_id: string | null;
  internal_url?: string | null;
}

/** Where an API replica reaches a host: its internal endpoint (null where it serves none). */
export interface HostEndpoint {
  internal_url: string | null;
  host_id: string;
}

/** Inserts the host, or refreshes its row; an image or endpoint not given keeps the one recorded. */
export async function register(q: Queryable, host: HostRegistration, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO hosts (host_id, name, accel, vcpus_total, memory_mib_total, disk_gib_total, image_id, heartbeat_at, internal_url)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (host_id) DO UPDATE SET name = $2, accel = $3, vcpus_total = $4, memory_mib_total = $5,
       disk_gib_total = $6, image_id = coalesce($7, hosts.image_id), heartbeat_at = $8, internal_url = coalesce($9, hosts.internal_url)`,
    [host.host_id, host.name, host.accel, host.vcpus_total, host.memory_mib_total, host.disk_gib_total, host.image_id, now, host.internal_url ?? null],
  );
}

export async function heartbeat(q: Queryable, hostId: string, imageId: string | null, now: Date): Promise<void> {
  await q.query('UPDATE hosts SET heartbeat_at = $2, image_id = coalesce($3, image_id) WHERE host_id = $1', [hostId, now, imageId]);
}

/** Placement skips a draining host; its VMs stay. Answers false for a host not registered. */
export async function setDraining(q: Queryable, hostId: string, draining: boolean): Promise<boolean> {
  const rows = await q.query('UPDATE hosts SET draining = $2 WHERE host_id = $1 RETURNING host_id', [hostId, draining]);
  return rows.length > 0;
}

/**
 * A host takes new VMs while it is live and not draining, and, when replicas reach it over the internal
 * endpoint, while it holds a live credential (one the operator revoked takes none until it registers again).
 */
const TAKING_VMS = `NOT draining AND heartbeat_at > $1 AND (internal_url IS NULL OR EXISTS (
  SELECT 1 FROM internal_credentials c WHERE c.holder_kind = 'host' AND c.holder_id = hosts.host_id AND c.revoked_at IS NULL))`;

/** The live hosts that take new VMs, locked for the rest of the transaction. */
export function lockTakingVms(q: Queryable, since: Date): Promise<HostRow[]> {
  return q.query<HostRow>(`SELECT * FROM hosts WHERE ${TAKING_VMS} ORDER BY host_id FOR UPDATE`, [since]);
}

/** How many live hosts take new VMs. */
export async function countTakingVms(q: Queryable, since: Date): Promise<number> {
  const [row] = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM hosts WHERE ${TAKING_VMS}`, [since]);
  return row.n;
}

/** The guest images live hosts run, the newest heartbeat's first. */
export async function liveImageIds(q: Queryable, since: Date): Promise<string[]> {
  const rows = await q.query<{ image_id: string }>(
    'SELECT image_id FROM hosts WHERE heartbeat_at > $1 AND image_id IS NOT NULL GROUP BY image_id ORDER BY max(heartbeat_at) DESC',
    [since],
  );
  return rows.map((r) => r.image_id);
}

/** Hosts silent since `since` (or before): lost. */
export async function listLost(q: Queryable, since: Date): Promise<string[]> {
  const rows = await q.query<{ host_id: string }>('SELECT host_id FROM hosts WHERE heartbeat_at <= $1', [since]);
  return rows.map((h) => h.host_id);
}

/** Whether the host has written a heartbeat after `since` (false for an unknown host). */
export async function isLive(q: Queryable, hostId: string, since: Date): Promise<boolean> {
  const [row] = await q.query<{ live: boolean }>('SELECT heartbeat_at > $2 AS live FROM hosts WHERE host_id = $1', [hostId, since]);
  return row?.live ?? false;
}

export async function lastHeartbeat(q: Queryable, hostId: string): Promise<Date | null> {
  const [row] = await q.query<{ heartbeat_at: Date | null }>('SELECT heartbeat_at FROM hosts WHERE host_id = $1', [hostId]);
  return row?.heartbeat_at ?? null;
}

/** The host's last loss, from its last heartbeat before it to its return. */
export async function recordLoss(q: Queryable, hostId: string, lostFrom: Date, lostUntil: Date): Promise<void> {
  await q.query('UPDATE hosts SET lost_from = $2, lost_until = $3 WHERE host_id = $1', [hostId, lostFrom, lostUntil]);
}

/** The host a VM is placed on. */
export async function endpointOfVm(q: Queryable, vmId: string): Promise<HostEndpoint | undefined> {
  const [row] = await q.query<HostEndpoint>('SELECT h.internal_url, h.host_id FROM vms v JOIN hosts h ON h.host_id = v.host_id WHERE v.vm_id = $1', [
    vmId,
  ]);
  return row;
}

/** The host of a template's source VM (where its capture runs). */
export async function endpointOfTemplate(q: Queryable, templateId: string): Promise<HostEndpoint | undefined> {
  const [row] = await q.query<HostEndpoint>(
    `SELECT h.internal_url, h.host_id FROM templates t JOIN vms v ON v.vm_id = t.source_vm_id JOIN hosts h ON h.host_id = v.host_id
     WHERE t.template_id = $1`,
    [templateId],
  );
  return row;
}
