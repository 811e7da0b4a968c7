/**
 * The `events` table: each tenant's feed, numbered per tenant (`event_counters`), append-only but
 * for the 30-day prune. Every write runs in the transaction of the change it reports.
 */
import type { Queryable } from './db.ts';

export interface EventRow {
  event_id: string;
  tenant_id: string;
  seq: number;
  type: string;
  data: unknown;
  created_at: Date;
}

/** The tenant's next event number; its counter row stays locked until the transaction ends. */
export async function nextSeq(q: Queryable, tenantId: string): Promise<number> {
  const [row] = await q.query<{ last_seq: number }>(
    `INSERT INTO event_counters (tenant_id, last_seq) VALUES ($1, 1)
     ON CONFLICT (tenant_id) DO UPDATE SET last_seq = event_counters.last_seq + 1 RETURNING last_seq`,
    [tenantId],
  );
  return row.last_seq;
}

export async function insert(q: Queryable, e: EventRow): Promise<void> {
  await q.query('INSERT INTO events (event_id, tenant_id, seq, type, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)', [
    e.event_id,
    e.tenant_id,
    e.seq,
    e.type,
    JSON.stringify(e.data),
    e.created_at,
  ]);
}

/** The tenant's events after number `after`, oldest first; one more than `limit` tells whether more follow. */
export function listAfter(q: Queryable, tenantId: string, after: number, limit: number): Promise<EventRow[]> {
  return q.query<EventRow>(
    'SELECT event_id, tenant_id, seq, type, data, created_at FROM events WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [tenantId, after, limit],
  );
}

export async function byId(q: Queryable, eventId: string): Promise<EventRow | undefined> {
  const [row] = await q.query<EventRow>('SELECT event_id, tenant_id, seq, type, data, created_at FROM events WHERE event_id = $1', [eventId]);
  return row;
}

/** Events older than `before` go (their deliveries with them); answers how many. */
export async function pruneBefore(q: Queryable, before: Date): Promise<number> {
  const rows = await q.query('DELETE FROM events WHERE created_at < $1 RETURNING 1', [before]);
  return rows.length;
}
