import { CYCLES, PLANS, PLAN_IDS, planPriceCents, TIERS, TIER_IDS, type Cycle, type PlanId, type TierId } from '../domain/plans.ts';
import { money } from './format.ts';

/** What a customer picks in the create form: a flat plan or a prepaid tier, as one choice. */
export type Offer = { kind: 'plan'; plan: PlanId; cycle: Cycle } | { kind: 'tier'; tier: TierId };

export const OFFER_CHOICES = [
  ...PLAN_IDS.map((p) => ({ value: `plan:${p}`, group: 'Flat plan, charged to your card', label: `${title(p)} · ${money(PLANS[p].monthly_cents)}/month · ${PLANS[p].vcpus} vCPU, ${PLANS[p].memory_mib / 1024} GiB, ${PLANS[p].disk_gib} GiB disk` })),
  ...TIER_IDS.map((t) => ({ value: `tier:${t}`, group: 'Pay as you go, from prepaid credits', label: `${t === 'ondemand' ? 'On-demand' : 'Spot'} · ${TIERS[t].cents_per_hour}¢/hour · 1 vCPU, 1 GiB${t === 'spot' ? ', may be preempted' : ''}` })),
];

function title(s: string) {
  return s[0].toUpperCase() + s.slice(1);
}

/** Reads the form's choice; anything unknown is null (the form shows the problem, nothing is charged). */
export function parseOffer(offer: string, cycle: string): Offer | null {
  const [kind, id] = offer.split(':');
  if (kind === 'plan' && (PLAN_IDS as string[]).includes(id)) {
    const c = cycle || 'monthly';
    if (!(CYCLES as readonly string[]).includes(c)) return null;
    return { kind: 'plan', plan: id as PlanId, cycle: c as Cycle };
  }
  if (kind === 'tier' && (TIER_IDS as string[]).includes(id)) return { kind: 'tier', tier: id as TierId };
  return null;
}

export function offerValue(o: Offer): string {
  return o.kind === 'plan' ? `plan:${o.plan}` : `tier:${o.tier}`;
}

/** What the customer is charged, said before charging: the price from plans.ts, the same table the domain charges. */
export function quote(o: Offer): { headline: string; detail: string; chargeNowCents: number } {
  if (o.kind === 'plan') {
    const cents = planPriceCents(o.plan, o.cycle);
    return {
      headline: `${money(cents)} ${o.cycle === 'annual' ? 'per year' : 'per month'}`,
      detail: `${money(cents)} is charged to your card now for the ${title(o.plan)} plan, billed ${o.cycle}.`,
      chargeNowCents: cents,
    };
  }
  const rate = TIERS[o.tier].cents_per_hour;
  return {
    headline: `${rate}¢ per hour of running time`,
    detail: `Drawn from prepaid credits by the second while the VM runs (${money(rate * 24 * 30)} for a 30-day month of running). Creating it needs at least ${money(rate)} of credits.`,
    chargeNowCents: 0,
  };
}

/** The API's request body for the offer. */
export function offerBody(o: Offer): { plan?: PlanId; cycle?: Cycle; tier?: TierId } {
  return o.kind === 'plan' ? { plan: o.plan, cycle: o.cycle } : { tier: o.tier };
}
