import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { planMonthlyCents, PLAN_IDS, TIER_IDS } from './plans.ts';
import * as vmStore from '../store/vms.ts';
import * as ledgerStore from '../store/ledger.ts';

export interface Usage {
  vms: { live: number; running: number; stopped: number; by_plan: Record<string, number>; by_tier: Record<string, number> };
  mrr: { amount_cents: number; by_plan: Record<string, number> };
  credits: { balance_cents: number; spent_month_cents: number };
}

const zeroes = (ids: readonly string[]) => Object.fromEntries(ids.map((id) => [id, 0]));

/**
 * Live VM counts and revenue. `live` counts VMs neither stopped nor failed; MRR sums the monthly price of
 * every plan VM the tenant keeps (destroyed ones no longer count), an annual price as a twelfth rounded down.
 */
export class UsageService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async get(tenantId: string): Promise<Usage> {
    const groups = await vmStore.tallyForTenant(this.db, tenantId);
    const usage: Usage = {
      vms: { live: 0, running: 0, stopped: 0, by_plan: zeroes(PLAN_IDS), by_tier: zeroes(TIER_IDS) },
      mrr: { amount_cents: 0, by_plan: zeroes(PLAN_IDS) },
      credits: { balance_cents: 0, spent_month_cents: 0 },
    };
    for (const g of groups) {
      if (g.status === 'running') usage.vms.running += g.n;
      if (g.status === 'stopped') usage.vms.stopped += g.n;
      if (g.status !== 'stopped' && g.status !== 'failed') usage.vms.live += g.n;
      if (g.plan && g.cycle) {
        usage.vms.by_plan[g.plan] += g.n;
        const cents = planMonthlyCents(g.plan, g.cycle) * g.n;
        usage.mrr.by_plan[g.plan] += cents;
        usage.mrr.amount_cents += cents;
      }
      if (g.tier) usage.vms.by_tier[g.tier] += g.n;
    }
    const now = this.clock.now();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const credits = await ledgerStore.creditsSummary(this.db, tenantId, monthStart);
    usage.credits = { balance_cents: credits.balance, spent_month_cents: credits.spent };
    return usage;
  }

  /** Spend per UTC day over the last `days` days (today included), every day present, zero when nothing was spent. */
  async dailySpend(tenantId: string, days: number): Promise<DailySpend[]> {
    const now = this.clock.now();
    const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1)));
    const rows = new Map((await ledgerStore.dailySpend(this.db, tenantId, first)).map((r) => [r.day, r]));
    return Array.from({ length: days }, (_, i) => {
      const day = new Date(first.getTime() + i * 86_400_000).toISOString().slice(0, 10);
      const r = rows.get(day);
      return { day, card_cents: r?.card ?? 0, credits_cents: r?.credits ?? 0 };
    });
  }
}

export interface DailySpend {
  day: string;
  card_cents: number;
  credits_cents: number;
}
