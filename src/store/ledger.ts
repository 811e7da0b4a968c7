/**
 * The `ledger` table: every money movement of a tenant, append-only (migration 001 refuses UPDATE
 * and DELETE). A tenant's credit balance is the sum of its rows. Each function takes the database or
 * the transaction it runs in; the tenant id is in every WHERE.
 */
import type { Queryable } from './db.ts';

/** What a charge or a draw was for. */
export interface LedgerMeta {
  description: string;
  vmId?: string;
  templateId?: string;
  plan?: string;
  cycle?: string;
}

/**
 * Takes the tenant's money lock (its row, until the transaction ends): every step that reads the
 * balance and then draws or charges holds it. The lock order of the whole store is the tenant's row,
 * then its quota lock (limits.ts), then VM rows, then the event counter; a transaction that may draw or stop other VMs takes this
 * first. NO KEY UPDATE, so an insert whose foreign key names the tenant (an event, a ledger row)
 * never waits for it. Answers whether the tenant exists.
 */
export async function lockTenant(q: Queryable, tenantId: string): Promise<boolean> {
  return (await q.query('SELECT 1 FROM tenants WHERE tenant_id = $1 FOR NO KEY UPDATE', [tenantId])).length > 0;
}

export async function creditBalance(q: Queryable, tenantId: string): Promise<number> {
  const [row] = await q.query<{ balance: number }>('SELECT coalesce(sum(credits_delta_cents), 0) AS balance FROM ledger WHERE tenant_id = $1', [
    tenantId,
  ]);
  return row.balance;
}

/** The credit balance, and the credits drawn since `monthStart`. */
export async function creditsSummary(q: Queryable, tenantId: string, monthStart: Date): Promise<{ balance: number; spent: number }> {
  const [credits] = await q.query<{ balance: number; spent: number }>(
    `SELECT coalesce(sum(credits_delta_cents), 0) AS balance,
            coalesce(sum(amount_cents) FILTER (WHERE kind = 'credit_draw' AND created_at >= $2), 0) AS spent
     FROM ledger WHERE tenant_id = $1`,
    [tenantId, monthStart],
  );
  return credits;
}

export async function recordCreditPurchase(q: Queryable, tenantId: string, amountCents: number, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO ledger (tenant_id, kind, amount_cents, credits_delta_cents, description, created_at)
     VALUES ($1, 'credit_purchase', $2, $2, 'prepaid credits', $3)`,
    [tenantId, amountCents, now],
  );
}

/** A charge of the card on file, with the payment provider's reference. */
export async function recordCardCharge(q: Queryable, tenantId: string, amountCents: number, meta: LedgerMeta, reference: string, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO ledger (tenant_id, kind, amount_cents, credits_delta_cents, vm_id, template_id, plan, cycle,
                         description, provider_reference, created_at)
     VALUES ($1, 'card_charge', $2, 0, $3, $4, $5, $6, $7, $8, $9)`,
    [tenantId, amountCents, meta.vmId ?? null, meta.templateId ?? null, meta.plan ?? null, meta.cycle ?? null, meta.description, reference, now],
  );
}

/** Prepaid credits drawn (running time of a tier VM). */
export async function recordCreditDraw(q: Queryable, tenantId: string, drawnCents: number, meta: LedgerMeta, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO ledger (tenant_id, kind, amount_cents, credits_delta_cents, vm_id, description, created_at)
     VALUES ($1, 'credit_draw', $2, $3, $4, $5, $6)`,
    [tenantId, drawnCents, -drawnCents, meta.vmId ?? null, meta.description, now],
  );
}

/** A ledger row as the customer reads it. */
export interface LedgerEntry {
  entry_id: number;
  kind: 'card_charge' | 'credit_purchase' | 'credit_draw';
  amount_cents: number;
  credits_delta_cents: number;
  vm_id: string | null;
  template_id: string | null;
  description: string;
  created_at: Date;
}

/** The tenant's ledger, newest first, and how many rows it has. */
export async function listForTenant(q: Queryable, tenantId: string, limit: number, offset: number): Promise<{ rows: LedgerEntry[]; total: number }> {
  const [rows, [count]] = await Promise.all([
    q.query<LedgerEntry>(
      `SELECT entry_id, kind, amount_cents, credits_delta_cents, vm_id, template_id, description, created_at
       FROM ledger WHERE tenant_id = $1 ORDER BY created_at DESC, entry_id DESC LIMIT $2 OFFSET $3`,
      [tenantId, limit, offset],
    ),
    q.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger WHERE tenant_id = $1', [tenantId]),
  ]);
  return { rows, total: count.n };
}

/** What each of the tenant's VMs has cost since `since` (card charges and credits drawn for it). */
export async function vmCostsSince(q: Queryable, tenantId: string, vmIds: string[], since: Date): Promise<Map<string, number>> {
  if (vmIds.length === 0) return new Map();
  const rows = await q.query<{ vm_id: string; cents: number }>(
    `SELECT vm_id, sum(amount_cents) AS cents FROM ledger
     WHERE tenant_id = $1 AND vm_id = ANY($2::text[]) AND kind IN ('card_charge', 'credit_draw') AND created_at >= $3
     GROUP BY vm_id`,
    [tenantId, vmIds, since],
  );
  return new Map(rows.map((r) => [r.vm_id, Number(r.cents)]));
}

/** Spend per UTC day since `since`: card charges and credits drawn, days without spend left out. */
export async function dailySpend(q: Queryable, tenantId: string, since: Date): Promise<{ day: string; card: number; credits: number }[]> {
  return q.query<{ day: string; card: number; credits: number }>(
    `SELECT to_char(date_trunc('day', created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day,
            coalesce(sum(amount_cents) FILTER (WHERE kind = 'card_charge'), 0)::int AS card,
            coalesce(sum(amount_cents) FILTER (WHERE kind = 'credit_draw'), 0)::int AS credits
     FROM ledger WHERE tenant_id = $1 AND created_at >= $2 AND kind <> 'credit_purchase'
     GROUP BY 1 ORDER BY 1`,
    [tenantId, since],
  );
}
