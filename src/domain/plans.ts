/** Prices and sizes of decisions.md section 5. Money is integer US cents. */
import type { Cycle, PlanId, TierId } from '../store/vmColumns.ts';

export type { Cycle, PlanId, TierId };
export const PLANS = {
  starter: { vcpus: 1, memory_mib: 1024, disk_gib: 10, monthly_cents: 1900, annual_cents: 19000 },
  pro: { vcpus: 2, memory_mib: 4096, disk_gib: 50, monthly_cents: 4900, annual_cents: 49000 },
  max: { vcpus: 4, memory_mib: 8192, disk_gib: 100, monthly_cents: 9900, annual_cents: 99000 },
} as const satisfies Record<PlanId, unknown>;
export const PLAN_IDS = Object.keys(PLANS) as PlanId[];

export const CYCLES = ['monthly', 'annual'] as const satisfies readonly Cycle[];

/** Tier VMs are sized like starter and draw credits per second of running time. */
export const TIERS = {
  ondemand: { cents_per_hour: 12, ...sizeOf('starter') },
  spot: { cents_per_hour: 4, ...sizeOf('starter') },
} as const satisfies Record<TierId, unknown>;
export const TIER_IDS = Object.keys(TIERS) as TierId[];

function sizeOf(plan: PlanId) {
  const { vcpus, memory_mib, disk_gib } = PLANS[plan];
  return { vcpus, memory_mib, disk_gib };
}

/** The charge for one plan VM on its cycle. */
export const planPriceCents = (plan: PlanId, cycle: Cycle) =>
  cycle === 'annual' ? PLANS[plan].annual_cents : PLANS[plan].monthly_cents;

/** What a plan VM adds to monthly recurring revenue: an annual price counts as a twelfth, rounded down. */
export const planMonthlyCents = (plan: PlanId, cycle: Cycle) =>
  cycle === 'annual' ? Math.floor(PLANS[plan].annual_cents / 12) : PLANS[plan].monthly_cents;
