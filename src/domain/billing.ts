import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError } from './errors.ts';
import type { PaymentProvider } from './payments.ts';
import * as ledgerStore from '../store/ledger.ts';

export interface Billing {
  card_on_file: boolean;
  brand: string | null;
  last4: string | null;
  credits_cents: number;
}

export type ChargeMeta = ledgerStore.LedgerMeta;

/** The card on file, prepaid credits and the append-only ledger behind both. */
export class BillingService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly provider: PaymentProvider,
  ) {}

  async get(tenantId: string, q: Queryable = this.db): Promise<Billing | null> {
    const [row] = await q.query<{ card_brand: string | null; card_last4: string | null; balance: number }>(
      `SELECT t.card_brand, t.card_last4,
              (SELECT coalesce(sum(credits_delta_cents), 0) FROM ledger l WHERE l.tenant_id = t.tenant_id) AS balance
       FROM tenants t WHERE t.tenant_id = $1`,
      [tenantId],
    );
    if (!row) return null;
    return {
      card_on_file: row.card_last4 !== null,
      brand: row.card_brand,
      last4: row.card_last4,
      credits_cents: row.balance,
    };
  }

  async setCard(tenantId: string, card: { brand: string; last4: string } | null): Promise<Billing | null> {
    const rows = await this.db.query(
      `UPDATE tenants SET card_brand = $2, card_last4 = $3, card_updated_at = $4 WHERE tenant_id = $1 RETURNING tenant_id`,
      [tenantId, card?.brand ?? null, card?.last4 ?? null, this.clock.now()],
    );
    return rows.length ? this.get(tenantId) : null;
  }

  creditBalance(q: Queryable, tenantId: string): Promise<number> {
    return ledgerStore.creditBalance(q, tenantId);
  }

  /** Adds prepaid credits; answers the new balance, or null for an unknown tenant. */
  async addCredits(tenantId: string, amountCents: number): Promise<number | null> {
    return this.db.transaction(async (tx) => {
      if (!(await ledgerStore.lockTenant(tx, tenantId))) return null;
      await ledgerStore.recordCreditPurchase(tx, tenantId, amountCents, this.clock.now());
      return this.creditBalance(tx, tenantId);
    });
  }

  /** Fails with card_required unless a card is on file. Call inside the transaction that will charge. */
  async requireCard(q: Queryable, tenantId: string): Promise<{ brand: string; last4: string }> {
    const [row] = await q.query<{ card_brand: string | null; card_last4: string | null }>(
      'SELECT card_brand, card_last4 FROM tenants WHERE tenant_id = $1 FOR NO KEY UPDATE',
      [tenantId],
    );
    if (!row?.card_last4) {
      throw new DomainError('card_required', 'a card on file is required for this operation', 'ask the account operator to add a card');
    }
    return { brand: row.card_brand ?? 'card', last4: row.card_last4 };
  }

  /** Charges the card on file through the provider and records the charge in the ledger. */
  async chargeCard(q: Queryable, tenantId: string, amountCents: number, meta: ChargeMeta): Promise<string> {
    const card = await this.requireCard(q, tenantId);
    const result = await this.provider.charge({ tenantId, card, amountCents, description: meta.description });
    if (!result.ok) {
      throw new DomainError('card_declined', result.message, 'use another card on file and try again');
    }
    await ledgerStore.recordCardCharge(q, tenantId, amountCents, meta, result.reference, this.clock.now());
    return result.reference;
  }

  /** Fails with insufficient_credits unless the balance covers `neededCents`. */
  async requireCredits(q: Queryable, tenantId: string, neededCents: number): Promise<number> {
    await ledgerStore.lockTenant(q, tenantId);
    const balance = await this.creditBalance(q, tenantId);
    if (balance < neededCents) {
      throw new DomainError(
        'insufficient_credits',
        `this needs ${neededCents} cents of prepaid credits; the balance is ${balance}`,
        'add prepaid credits and try again',
      );
    }
    return balance;
  }

  /** The tenant's ledger, newest first. */
  ledger(tenantId: string, limit: number, offset: number): Promise<{ rows: ledgerStore.LedgerEntry[]; total: number }> {
    return ledgerStore.listForTenant(this.db, tenantId, limit, offset);
  }

  /** Draws up to `amountCents` from the balance, never below zero; answers what was drawn. */
  async drawCredits(q: Queryable, tenantId: string, amountCents: number, meta: ChargeMeta): Promise<number> {
    await ledgerStore.lockTenant(q, tenantId);
    const drawn = Math.min(amountCents, Math.max(0, await this.creditBalance(q, tenantId)));
    if (drawn > 0) {
      await ledgerStore.recordCreditDraw(q, tenantId, drawn, meta, this.clock.now());
    }
    return drawn;
  }
}
