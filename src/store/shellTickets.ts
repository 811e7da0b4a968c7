/**
 * The `shell_tickets` table: one-use tickets for VM shell sockets, by the hash of each. A ticket is
 * taken in one statement (unused, unexpired, for this VM), so two sockets can never share one.
 */
import type { Queryable } from './db.ts';

export interface NewShellTicket {
  ticket_hash: string;
  tenant_id: string;
  vm_id: string;
  expires_at: Date;
}

/** Records a ticket; tickets that expired a while ago go at the same time. */
export async function insert(q: Queryable, t: NewShellTicket, now: Date): Promise<void> {
  await q.query('DELETE FROM shell_tickets WHERE expires_at < $1', [new Date(now.getTime() - 3_600_000)]);
  await q.query('INSERT INTO shell_tickets (ticket_hash, tenant_id, vm_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
    t.ticket_hash,
    t.tenant_id,
    t.vm_id,
    now,
    t.expires_at,
  ]);
}

/** Uses the ticket up: its tenant, or null when it is unknown, used, expired or for another VM. */
export async function redeem(q: Queryable, ticketHash: string, vmId: string, now: Date): Promise<{ tenant_id: string } | null> {
  const [row] = await q.query<{ tenant_id: string }>(
    `UPDATE shell_tickets SET used_at = $3
     WHERE ticket_hash = $1 AND vm_id = $2 AND used_at IS NULL AND expires_at > $3
     RETURNING tenant_id`,
    [ticketHash, vmId, now],
  );
  return row ?? null;
}
