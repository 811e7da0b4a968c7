/**
 * The platform's own lifecycle work, run by every process on a timer: VMs idle past their
 * `auto_stop_after_s` are stopped (status_reason `idle`), VMs past their `expires_at` are destroyed
 * (status_reason `expired`, at their time: see passAtNextExpiry), events older than 30 days go, and every few minutes billing is reconciled
 * (billingReconcile.ts: metering watermarks, VM states and the ledger compared, drift logged and fixed). Each step claims its rows in the
 * database (one conditional UPDATE, or SKIP LOCKED), so with several processes each VM is acted on
 * once, by whichever looks first; the state lives in rows, so a restart loses nothing.
 */
import type { Services } from '../domain/services.ts';
import type { Logger } from '../log.ts';
import { PeriodicJob } from './periodic.ts';
import { BillingReconciler } from './billingReconcile.ts';

/** The least time between passes for expiries (a VM whose destruction fails stays expired). */
const MIN_EXPIRY_WAIT_MS = 250;

export interface LifecycleJobOptions {
  services: Services;
  log: Logger;
  intervalMs?: number;
  /** How often old events are pruned. */
  pruneEveryMs?: number;
  /** How often billing is reconciled (default 3 min). */
  reconcileEveryMs?: number;
}

export class LifecycleJob extends PeriodicJob {
  private lastPrune = 0;
  private lastReconcile = 0;
  readonly billing: BillingReconciler;

  constructor(private readonly o: LifecycleJobOptions) {
    super(o, 'lifecycle pass failed');
    this.billing = new BillingReconciler({ db: o.services.db, clock: o.services.clock, log: o.log });
  }

  private expiryTimer: NodeJS.Timeout | undefined;
  private started = false;

  override start(): void {
    this.started = true;
    super.start();
  }

  override async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.expiryTimer);
    await super.stop();
  }

  /**
   * A VM that expires before the next pass is destroyed at its time, not up to a pass later: one more
   * pass then (E2B's setTimeout of a few seconds is checked a second after it). Not sooner than
   * MIN_EXPIRY_WAIT_MS apart. Only for a started job (tests drive passes themselves).
   */
  private async passAtNextExpiry(now: Date): Promise<void> {
    if (!this.started) return;
    const next = await this.o.services.vms.nextExpiry();
    const wait = next ? next.getTime() - now.getTime() : Infinity;
    if (wait >= (this.o.intervalMs ?? 5000)) return;
    clearTimeout(this.expiryTimer);
    this.expiryTimer = setTimeout(() => void this.tick(), Math.max(MIN_EXPIRY_WAIT_MS, wait + 10));
    this.expiryTimer.unref();
  }

  protected async pass(): Promise<void> {
    const { services, log } = this.o;
    const now = services.clock.now();
    for (const vmId of await services.vms.stopIdle()) log.info({ vm_id: vmId }, 'VM idle: stopping it');
    for (const vmId of await services.vms.destroyExpired()) log.info({ vm_id: vmId }, 'VM expired: destroyed');
    await this.passAtNextExpiry(now);
    if (now.getTime() - this.lastPrune >= (this.o.pruneEveryMs ?? 3600_000)) {
      this.lastPrune = now.getTime();
      const pruned = await services.events.prune();
      if (pruned) log.info({ events: pruned }, 'pruned events older than 30 days');
    }
    if (now.getTime() - this.lastReconcile >= (this.o.reconcileEveryMs ?? 180_000)) {
      this.lastReconcile = now.getTime();
      await this.billing.check();
      const abandoned = await services.snapshots.failAbandoned();
      if (abandoned) log.warn({ snapshots: abandoned }, 'snapshots still being made an hour after they began were failed');
    }
  }
}
