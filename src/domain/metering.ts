import type { Queryable } from '../store/db.ts';
import * as hostVmStore from '../store/vmsOnHost.ts';
import type { BillingService } from './billing.ts';
import { TIERS, type TierId } from './plans.ts';

const MS_PER_HOUR = 3_600_000;

/**
 * Per-second metering of a tier VM, exact in integer cents. Running time accumulates in
 * milliseconds; whole cents are drawn as they accrue and the remainder (under one cent) is carried.
 * A final reading (the VM is destroyed) rounds the remainder up to one cent.
 */
export function meterReading(tier: TierId, unbilledMs: number, elapsedMs: number, final: boolean): { cents: number; msCovered: (drawn: number) => number } {
  const rate = TIERS[tier].cents_per_hour;
  const ms = unbilledMs + Math.max(0, elapsedMs);
  let cents = Math.floor((ms * rate) / MS_PER_HOUR);
  if (final && (ms * rate) % MS_PER_HOUR > 0) cents += 1;
  // One cent buys 3,600,000 / rate ms: 300,000 ms on-demand, 900,000 ms spot, both whole numbers.
  return { cents, msCovered: (drawn) => Math.min(ms, (drawn * MS_PER_HOUR) / rate) };
}

export interface MeteredVm {
  vm_id: string;
  tenant_id: string;
  tier: TierId | null;
  unbilled_ms: number;
  metered_until: Date | null;
}

/**
 * Draws the credits a running tier VM has used up to `now` and moves its watermark. Call with the VM
 * row locked. `running` false ends the metered interval (the VM stopped). Answers whether the
 * tenant's credits are now exhausted.
 */
export async function meterVm(
  tx: Queryable,
  billing: BillingService,
  vm: MeteredVm,
  now: Date,
  opts: { running: boolean; final?: boolean },
): Promise<{ drawn: number; exhausted: boolean }> {
  if (!vm.tier) return { drawn: 0, exhausted: false };
  const elapsed = vm.metered_until ? now.getTime() - new Date(vm.metered_until).getTime() : 0;
  const reading = meterReading(vm.tier, vm.unbilled_ms, elapsed, opts.final ?? false);
  const drawn = reading.cents > 0
    ? await billing.drawCredits(tx, vm.tenant_id, reading.cents, { vmId: vm.vm_id, description: `${vm.tier} running time` })
    : 0;
  const ms = vm.unbilled_ms + Math.max(0, elapsed);
  const unbilled = opts.final ? 0 : Math.max(0, ms - reading.msCovered(drawn));
  await hostVmStore.recordMetered(tx, vm.vm_id, Math.round(unbilled), opts.running ? now : null);
  const exhausted = drawn < reading.cents || (reading.cents > 0 && (await billing.creditBalance(tx, vm.tenant_id)) <= 0);
  return { drawn, exhausted };
}
