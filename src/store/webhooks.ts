/**
 * The `webhooks` and `webhook_deliveries` tables. A customer's read or change carries the tenant id in
 * its WHERE; the sender claims due deliveries by moving their next attempt on (SKIP LOCKED), so that
 * any number of processes send each attempt once.
 */
import type { Queryable } from './db.ts';

export interface WebhookRow {
  webhook_id: string;
  tenant_id: string;
  url: string;
  events: string[];
  secret: string;
  created_at: Date;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveryRow {
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  last_attempt_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  delivered_at: Date | null;
}

/** A delivery claimed for an attempt: what to send, where, and how to sign it. */
export interface ClaimedDelivery {
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  attempts: number;
  created_at: Date;
  url: string;
  secret: string;
  event_type: string;
  event_data: unknown;
  event_created_at: Date;
}

const COLUMNS = 'webhook_id, tenant_id, url, events, secret, created_at';

export async function insert(q: Queryable, w: WebhookRow): Promise<WebhookRow> {
  const [row] = await q.query<WebhookRow>(
    `INSERT INTO webhooks (webhook_id, tenant_id, url, events, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
    [w.webhook_id, w.tenant_id, w.url, w.events, w.secret, w.created_at],
  );
  return row;
}

export function listForTenant(q: Queryable, tenantId: string): Promise<WebhookRow[]> {
  return q.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE tenant_id = $1 ORDER BY created_at DESC, webhook_id DESC`, [tenantId]);
}

export async function getForTenant(q: Queryable, tenantId: string, webhookId: string): Promise<WebhookRow | undefined> {
  const [row] = await q.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2`, [tenantId, webhookId]);
  return row;
}

/** Deletes the webhook and its deliveries (pending ones are not sent). */
export async function remove(q: Queryable, tenantId: string, webhookId: string): Promise<WebhookRow | undefined> {
  const [row] = await q.query<WebhookRow>(`DELETE FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2 RETURNING ${COLUMNS}`, [tenantId, webhookId]);
  return row;
}

/** One pending delivery of the event to each of the tenant's webhooks that asked for its type. */
export async function enqueueForEvent(q: Queryable, tenantId: string, eventId: string, type: string, now: Date): Promise<number> {
  const rows = await q.query(
    `INSERT INTO webhook_deliveries (delivery_id, webhook_id, tenant_id, event_id, status, next_attempt_at, created_at)
     SELECT 'whd_' || md5(w.webhook_id || $2), w.webhook_id, w.tenant_id, $2, 'pending', $4, $4
     FROM webhooks w WHERE w.tenant_id = $1 AND $3 = ANY (w.events)
     RETURNING 1`,
    [tenantId, eventId, type, now],
  );
  return rows.length;
}

/** A webhook's deliveries, newest first; one more than `limit` tells whether more follow. */
export function listDeliveries(q: Queryable, tenantId: string, webhookId: string, limit: number, offset: number): Promise<DeliveryRow[]> {
  return q.query<DeliveryRow>(
    `SELECT d.delivery_id, d.webhook_id, d.event_id, e.type AS event_type, d.status, d.attempts, d.next_attempt_at,
            d.last_attempt_at, d.last_status_code, d.last_error, d.created_at, d.delivered_at
     FROM webhook_deliveries d JOIN events e ON e.event_id = d.event_id
     WHERE d.tenant_id = $1 AND d.webhook_id = $2
     ORDER BY d.created_at DESC, d.delivery_id DESC LIMIT $3 OFFSET $4`,
    [tenantId, webhookId, limit, offset],
  );
}

/** Webhooks with a delivery due, but those in `busy` (served already by this process). */
export async function webhooksWithDue(q: Queryable, now: Date, busy: string[], limit: number): Promise<string[]> {
  const rows = await q.query<{ webhook_id: string }>(
    `SELECT DISTINCT webhook_id FROM webhook_deliveries
     WHERE status = 'pending' AND next_attempt_at <= $1 AND NOT (webhook_id = ANY($2::text[])) LIMIT $3`,
    [now, busy, limit],
  );
  return rows.map((r) => r.webhook_id);
}

/**
 * Claims the webhook's oldest due delivery for one attempt: its next attempt moves to `leaseUntil`,
 * so that a sender that dies mid-attempt leaves it to be tried again then. A row another sender is
 * claiming is skipped.
 */
export async function claimNext(q: Queryable, webhookId: string, now: Date, leaseUntil: Date): Promise<ClaimedDelivery | undefined> {
  const [row] = await q.query<ClaimedDelivery>(
    `UPDATE webhook_deliveries d SET next_attempt_at = $3
     FROM webhooks w, events e
     WHERE d.delivery_id = (SELECT delivery_id FROM webhook_deliveries
                            WHERE webhook_id = $1 AND status = 'pending' AND next_attempt_at <= $2
                            ORDER BY created_at, delivery_id LIMIT 1 FOR UPDATE SKIP LOCKED)
       AND w.webhook_id = d.webhook_id AND e.event_id = d.event_id
     RETURNING d.delivery_id, d.webhook_id, d.event_id, d.attempts, d.created_at, w.url, w.secret,
               e.type AS event_type, e.data AS event_data, e.created_at AS event_created_at`,
    [webhookId, now, leaseUntil],
  );
  return row;
}

/** The outcome of one attempt: delivered, retried at `nextAttemptAt`, or failed for good (null). */
export async function recordAttempt(
  q: Queryable,
  deliveryId: string,
  a: { at: Date; statusCode: number | null; error: string | null; delivered: boolean; nextAttemptAt: Date | null },
): Promise<void> {
  await q.query(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $2::timestamptz, last_status_code = $3, last_error = $4,
       status = CASE WHEN $5::boolean THEN 'delivered' WHEN $6::timestamptz IS NULL THEN 'failed' ELSE 'pending' END,
       delivered_at = CASE WHEN $5::boolean THEN $2::timestamptz ELSE NULL END,
       next_attempt_at = coalesce($6::timestamptz, next_attempt_at)
     WHERE delivery_id = $1 AND status = 'pending'`,
    [deliveryId, a.at, a.statusCode, a.error, a.delivered, a.nextAttemptAt],
  );
}

/** The earliest pending attempt, for a sender deciding how long it may sleep. */
export async function nextDue(q: Queryable): Promise<Date | null> {
  const [row] = await q.query<{ at: Date | null }>(`SELECT min(next_attempt_at) AS at FROM webhook_deliveries WHERE status = 'pending'`);
  return row?.at ?? null;
}
