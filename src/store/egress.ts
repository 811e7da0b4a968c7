/**
 * The tables of egress: a VM's brokered secrets (sealed; opened only by the gateway of the VM's host)
 * and the log of its gateway connections. Its policy is a column of `vms` (vms.ts).
 */
import type { Queryable } from './db.ts';

export interface EgressLogEntry {
  at: Date;
  host: string;
  port: number;
  decision: 'allowed' | 'denied';
  reason: string;
  bytes_out: number;
  bytes_in: number;
}

/** Sets (sealed value) or removes (null) brokered secrets and answers the names the VM now has. */
export async function putBrokered(q: Queryable, vmId: string, set: Record<string, string | null>): Promise<string[]> {
  for (const [name, sealed] of Object.entries(set)) {
    if (sealed === null) await q.query('DELETE FROM vm_brokered_secrets WHERE vm_id = $1 AND name = $2', [vmId, name]);
    else
      await q.query(
        `INSERT INTO vm_brokered_secrets (vm_id, name, sealed) VALUES ($1, $2, $3)
         ON CONFLICT (vm_id, name) DO UPDATE SET sealed = EXCLUDED.sealed`,
        [vmId, name, sealed],
      );
  }
  const rows = await q.query<{ name: string }>('SELECT name FROM vm_brokered_secrets WHERE vm_id = $1 ORDER BY name', [vmId]);
  return rows.map((r) => r.name);
}

export async function brokeredSecret(q: Queryable, vmId: string, name: string): Promise<string | null> {
  const [row] = await q.query<{ sealed: string }>('SELECT sealed FROM vm_brokered_secrets WHERE vm_id = $1 AND name = $2', [vmId, name]);
  return row?.sealed ?? null;
}

/** A VM's brokered secrets, sealed (for sealing them again for VMs branched from it). */
export async function listBrokered(q: Queryable, vmId: string): Promise<Array<{ name: string; sealed: string }>> {
  return q.query<{ name: string; sealed: string }>('SELECT name, sealed FROM vm_brokered_secrets WHERE vm_id = $1 ORDER BY name', [vmId]);
}

/** A destroyed VM's keys go with it. */
export async function removeBrokered(q: Queryable, vmId: string): Promise<void> {
  await q.query('DELETE FROM vm_brokered_secrets WHERE vm_id = $1', [vmId]);
}

/** A connection's decision, as it is made; answers the row id that `logBytes` completes. */
export async function logConnection(q: Queryable, vmId: string, e: Omit<EgressLogEntry, 'bytes_out' | 'bytes_in'>): Promise<number> {
  const [row] = await q.query<{ id: number }>(
    'INSERT INTO egress_log (vm_id, at, host, port, decision, reason) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id',
    [vmId, e.at, e.host, e.port, e.decision, e.reason],
  );
  return row.id;
}

export async function logBytes(q: Queryable, id: number, bytesOut: number, bytesIn: number): Promise<void> {
  await q.query('UPDATE egress_log SET bytes_out = $2, bytes_in = $3 WHERE id = $1', [id, bytesOut, bytesIn]);
}

/** Newest first; one more than `limit` is read to tell whether there are more. */
export async function listLog(q: Queryable, vmId: string, limit: number): Promise<{ data: EgressLogEntry[]; has_more: boolean }> {
  const rows = await q.query<EgressLogEntry>(
    `SELECT at, host, port, decision, reason, bytes_out, bytes_in FROM egress_log
     WHERE vm_id = $1 ORDER BY at DESC, id DESC LIMIT $2`,
    [vmId, limit + 1],
  );
  return { data: rows.slice(0, limit), has_more: rows.length > limit };
}

/** Log rows older than `before` go (the log keeps 7 days). */
export async function pruneLog(q: Queryable, before: Date): Promise<number> {
  const rows = await q.query('DELETE FROM egress_log WHERE at < $1 RETURNING 1', [before]);
  return rows.length;
}
