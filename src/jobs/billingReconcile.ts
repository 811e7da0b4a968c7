/**
 * Zombie-proof billing: every few minutes (from the lifecycle job, in every process) the metering
 * watermarks, the VM states and the ledger are compared, drift is logged, and fixed where the rule is
 * clear. The fixes are conditional UPDATEs on the rows as they still are, so two processes looking at
 * once fix a row once, and a host that is acting on a VM right now (its `updated_at` is recent) is
 * left to finish.
 *
 * Fixed:
 * - `open_watermark_not_running`: a tier VM that is stopped, failed or deleted still has an open
 *   metering watermark. It draws nothing (section 5: a stopped or failed tier VM draws nothing): the
 *   watermark is closed without a draw (a deleted VM's carried remainder goes too).
 * - `plan_vm_metered`: a plan VM has a watermark (plans are paid by the month, never metered): cleared.
 * - `running_not_metered`: a running tier VM has no watermark: metering starts now (the time before is
 *   not charged).
 * Logged only (no rule says what the right amount is):
 * - `stale_watermark`: a running tier VM's watermark has not moved for `staleMs` (its host meters
 *   every 10 s; a lost host's time is forgiven when it comes back).
 * - `draw_for_plan_vm`: a credit draw names a VM that has no tier.
 * - `negative_balance`: a tenant's credits are below zero (draws never go below zero).
 */
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';

export type DriftKind =
  | 'open_watermark_not_running'
  | 'plan_vm_metered'
  | 'running_not_metered'
  | 'stale_watermark'
  | 'draw_for_plan_vm'
  | 'negative_balance';

export interface Drift {
  kind: DriftKind;
  tenant_id: string;
  vm_id: string | null;
  fixed: boolean;
  detail: string;
}

export interface BillingReconcileOptions {
  db: Db;
  clock: Clock;
  log: Logger;
  /** A VM changed more recently than this is left to its host (default 60 s). */
  graceMs?: number;
  /** A running tier VM's watermark older than this is reported (default 10 min). */
  staleMs?: number;
}

export class BillingReconciler {
  constructor(private readonly o: BillingReconcileOptions) {}

  /** One comparison: answers every drift found (and fixed, where the rule is clear), each also logged. */
  async check(): Promise<Drift[]> {
    const { db, clock } = this.o;
    const now = clock.now();
    const settledBefore = new Date(now.getTime() - (this.o.graceMs ?? 60_000));
    const staleBefore = new Date(now.getTime() - (this.o.staleMs ?? 600_000));
    const drift: Drift[] = [];

    const closed = await db.query<{ vm_id: string; tenant_id: string; status: string; deleted: boolean; metered_until: Date }>(
      `WITH found AS (
         SELECT vm_id, metered_until FROM vms
         WHERE tier IS NOT NULL AND metered_until IS NOT NULL AND (status IN ('stopped', 'failed') OR deleted_at IS NOT NULL)
           AND updated_at < $1
         FOR UPDATE SKIP LOCKED)
       UPDATE vms v SET metered_until = NULL, unbilled_ms = CASE WHEN v.deleted_at IS NULL THEN v.unbilled_ms ELSE 0 END
       FROM found WHERE v.vm_id = found.vm_id
       RETURNING v.vm_id, v.tenant_id, v.status, v.deleted_at IS NOT NULL AS deleted, found.metered_until`,
      [settledBefore],
    );
    for (const r of closed) {
      drift.push({
        kind: 'open_watermark_not_running',
        tenant_id: r.tenant_id,
        vm_id: r.vm_id,
        fixed: true,
        detail: `a ${r.deleted ? 'deleted' : r.status} tier VM was still metered from ${new Date(r.metered_until).toISOString()}; its watermark is closed without a draw`,
      });
    }

    const plans = await db.query<{ vm_id: string; tenant_id: string }>(
      `UPDATE vms SET metered_until = NULL, unbilled_ms = 0
       WHERE tier IS NULL AND (metered_until IS NOT NULL OR unbilled_ms <> 0) RETURNING vm_id, tenant_id`,
    );
    for (const r of plans) {
      drift.push({ kind: 'plan_vm_metered', tenant_id: r.tenant_id, vm_id: r.vm_id, fixed: true, detail: 'a plan VM had a metering watermark; cleared' });
    }

    const started = await db.query<{ vm_id: string; tenant_id: string }>(
      `UPDATE vms SET metered_until = $2
       WHERE tier IS NOT NULL AND metered_until IS NULL AND status = 'running' AND desired_state = 'running'
         AND deleted_at IS NULL AND updated_at < $1
       RETURNING vm_id, tenant_id`,
      [settledBefore, now],
    );
    for (const r of started) {
      drift.push({ kind: 'running_not_metered', tenant_id: r.tenant_id, vm_id: r.vm_id, fixed: true, detail: 'a running tier VM was not metered; metering starts now' });
    }

    const stale = await db.query<{ vm_id: string; tenant_id: string; metered_until: Date }>(
      `SELECT vm_id, tenant_id, metered_until FROM vms
       WHERE tier IS NOT NULL AND status = 'running' AND deleted_at IS NULL AND metered_until < $1`,
      [staleBefore],
    );
    for (const r of stale) {
      drift.push({
        kind: 'stale_watermark',
        tenant_id: r.tenant_id,
        vm_id: r.vm_id,
        fixed: false,
        detail: `a running tier VM's watermark has not moved since ${new Date(r.metered_until).toISOString()}`,
      });
    }

    const planDraws = await db.query<{ vm_id: string; tenant_id: string; n: number }>(
      `SELECT l.vm_id, l.tenant_id, count(*)::int AS n FROM ledger l JOIN vms v ON v.vm_id = l.vm_id
       WHERE l.kind = 'credit_draw' AND v.tier IS NULL GROUP BY l.vm_id, l.tenant_id`,
    );
    for (const r of planDraws) {
      drift.push({ kind: 'draw_for_plan_vm', tenant_id: r.tenant_id, vm_id: r.vm_id, fixed: false, detail: `${r.n} credit draws name a plan VM` });
    }

    const negative = await db.query<{ tenant_id: string; balance: number }>(
      `SELECT tenant_id, sum(credits_delta_cents)::int AS balance FROM ledger GROUP BY tenant_id HAVING sum(credits_delta_cents) < 0`,
    );
    for (const r of negative) {
      drift.push({ kind: 'negative_balance', tenant_id: r.tenant_id, vm_id: null, fixed: false, detail: `credits are ${r.balance} cents` });
    }

    for (const d of drift) this.o.log.warn({ drift: d.kind, tenant_id: d.tenant_id, vm_id: d.vm_id, fixed: d.fixed }, `billing drift: ${d.detail}`);
    return drift;
  }
}
