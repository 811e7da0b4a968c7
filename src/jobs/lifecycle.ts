/**
 * The platform's own lifecycle work, run by every process on a timer: VMs idle past their
 * `auto_stop_after_s` are stopped (status_reason `idle`), VMs past their `expires_at` are destroyed
 * (status_reason `expired`), and events older than 30 days go. Each step claims its rows in the
 * database (one conditional UPDATE, or SKIP LOCKED), so with several processes each VM is acted on
 * once, by whichever looks first; the state lives in rows, so a restart loses nothing.
 */
import type { Services } from '../domain/services.ts';
import type { Logger } from '../log.ts';

export interface LifecycleJobOptions {
  services: Services;
  log: Logger;
  intervalMs?: number;
  /** How often old events are pruned. */
  pruneEveryMs?: number;
}

export class LifecycleJob {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private lastPrune = 0;

  constructor(private readonly o: LifecycleJobOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.o.intervalMs ?? 5000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass (tests call it with a clock they move). */
  tick(): Promise<void> {
    this.running ??= this.pass()
      .catch((err) => this.o.log.error({ err }, 'lifecycle pass failed'))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<void> {
    const { services, log } = this.o;
    const now = services.clock.now();
    for (const vmId of await services.vms.stopIdle()) log.info({ vm_id: vmId }, 'VM idle: stopping it');
    for (const vmId of await services.vms.destroyExpired()) log.info({ vm_id: vmId }, 'VM expired: destroyed');
    if (now.getTime() - this.lastPrune >= (this.o.pruneEveryMs ?? 3600_000)) {
      this.lastPrune = now.getTime();
      const pruned = await services.events.prune();
      if (pruned) log.info({ events: pruned }, 'pruned events older than 30 days');
    }
  }
}
