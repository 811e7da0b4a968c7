import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { planMonthlyCents, PLAN_IDS, TIER_IDS, type Cycle, type PlanId } from './plans.ts';

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
    const groups = await this.db.query<{ status: string; plan: PlanId | null; cycle: Cycle | null; tier: string | null; n: number }>(
      `SELECT status, plan, cycle, tier, count(*)::int AS n FROM vms
       WHERE tenant_id = $1 AND deleted_at IS NULL GROUP BY status, plan, cycle, tier`,
      [tenantId],
    );
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
    const [credits] = await this.db.query<{ balance: number; spent: number }>(
      `SELECT coalesce(sum(credits_delta_cents), 0) AS balance,
              coalesce(sum(amount_cents) FILTER (WHERE kind = 'credit_draw' AND created_at >= $2), 0) AS spent
       FROM ledger WHERE tenant_id = $1`,
      [tenantId, monthStart],
    );
    usage.credits = { balance_cents: credits.balance, spent_month_cents: credits.spent };
    return usage;
  }
}
