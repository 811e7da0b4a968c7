/**
 * A VM order from a request, checked before anything is touched: the plan or tier and its size, the
 * harness, the egress policy, idle stop and expiry (400 naming the field when one is wrong).
 */
import { invalid } from './errors.ts';
import { getHarness, DEFAULT_HARNESS } from '../harness/catalogue.ts';
import { PLANS, TIERS, type Cycle, type PlanId, type TierId } from './plans.ts';
import { normalizePolicy, policyProblem, type EgressPolicy } from './egress.ts';

export interface CreateVmInput {
  plan?: PlanId;
  cycle?: Cycle;
  tier?: TierId;
  harness?: string;
  count?: number;
  egress?: EgressPolicy;
  /** The image the VM's root starts from: an id or a slug; `base` when absent. */
  image?: string;
  auto_stop_after_s?: number | null;
  /** RFC 3339; must be in the future. */
  expires_at?: string | null;
  /** A preview request starts the VM when it is suspended (decisions section 16). */
  auto_resume?: boolean;
}

/** Idle stop and expiry as a request gives them (a field left out keeps its value; null clears it). */
export interface VmTimersInput {
  auto_stop_after_s?: number | null;
  expires_at?: string | null;
  auto_resume?: boolean;
}

/** A create request resolved against the catalogue: what will be charged and how big each VM is. */
export interface VmOrder {
  plan: PlanId | null;
  cycle: Cycle | null;
  tier: TierId | null;
  harness: string;
  count: number;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  /** The policy asked for; null for the harness's default. */
  egress: EgressPolicy | null;
  auto_stop_after_s: number | null;
  expires_at: Date | null;
  /** A preview request starts the VM when it is suspended. */
  auto_resume?: boolean;
}

/** A policy from a request, checked (400 naming the entry) and normalised; null when none was given. */
export function checkedEgress(policy: EgressPolicy | undefined): EgressPolicy | null {
  if (!policy) return null;
  const problem = policyProblem(policy);
  if (problem) throw invalid(problem.field, problem.message);
  return normalizePolicy(policy);
}

/** Checks idle stop and expiry against the clock (the schema has checked their form). */
export function checkedTimers(input: VmTimersInput, now: Date): { auto_stop_after_s?: number | null; expires_at?: Date | null } {
  const out: { auto_stop_after_s?: number | null; expires_at?: Date | null } = {};
  if (input.auto_stop_after_s !== undefined) {
    const s = input.auto_stop_after_s;
    if (s !== null && (!Number.isInteger(s) || s < 60 || s > 604_800)) throw invalid('auto_stop_after_s', 'must be null or a whole number of seconds from 60 to 604800');
    out.auto_stop_after_s = s;
  }
  if (input.expires_at !== undefined) {
    if (input.expires_at === null) out.expires_at = null;
    else {
      const at = new Date(input.expires_at);
      if (Number.isNaN(at.getTime())) throw invalid('expires_at', 'must be an RFC 3339 time');
      if (at.getTime() <= now.getTime()) throw invalid('expires_at', 'must be in the future');
      out.expires_at = at;
    }
  }
  return out;
}

export function resolveOrder(input: CreateVmInput, now: Date = new Date()): VmOrder {
  const count = input.count ?? 1;
  const timers = checkedTimers(input, now);
  const egress = checkedEgress(input.egress);
  if (input.plan && input.tier) throw invalid('tier', 'give either a plan or a tier, not both');
  if (input.cycle && input.tier) throw invalid('cycle', 'a billing cycle belongs to a flat plan, not to a tier');
  if (count > 1 && input.tier !== 'spot') throw invalid('count', 'more than one VM at once (a swarm) needs tier "spot"');
  const harness = input.harness ?? DEFAULT_HARNESS;
  if (!getHarness(harness)) throw invalid('harness', `unknown harness "${harness}"`);
  if (input.tier) {
    const { vcpus, memory_mib, disk_gib } = TIERS[input.tier];
    return { plan: null, cycle: null, tier: input.tier, harness, count, vcpus, memory_mib, disk_gib, egress, auto_stop_after_s: timers.auto_stop_after_s ?? null, expires_at: timers.expires_at ?? null, auto_resume: input.auto_resume === true };
  }
  const plan = input.plan ?? 'starter';
  const { vcpus, memory_mib, disk_gib } = PLANS[plan];
  return { plan, cycle: input.cycle ?? 'monthly', tier: null, harness, count, vcpus, memory_mib, disk_gib, egress, auto_stop_after_s: timers.auto_stop_after_s ?? null, expires_at: timers.expires_at ?? null, auto_resume: input.auto_resume === true };
}
