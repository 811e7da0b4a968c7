/**
 * The level-triggered loop under the reconciler: a pass over this host's VM rows soon after anything
 * changes and every interval, at most one pass at a time and one action in flight per VM; a VM that
 * cannot proceed yet is retried later, each time later, unless its customer asks something new.
 */
import type { VmState } from '../store/vmsOnHost.ts';
import type { Logger } from '../log.ts';

/** What one pass over a VM came to: its desired state reached, or something it must wait for first. */
export type Outcome = { done: true } | { done: false; waitingFor: string };
export const DONE: Outcome = { done: true };

/** Retry delays of a VM that cannot proceed yet: 250 ms doubling to 30 s. */
export function retryDelayMs(attempts: number): number {
  return Math.min(30_000, 250 * 2 ** Math.min(attempts, 7));
}

/** The part of a row a customer changes: a new request on a waiting VM is acted on at once. */
const generation = (row: VmState) => `${row.desired_state}:${row.restart_requested}:${row.reprovision_requested}`;

export interface LoopOptions {
  /** This host's VM rows as they stand. */
  rows(): Promise<VmState[]>;
  needsWork(row: VmState): boolean;
  /** One pass over one VM (the loop never runs two for one VM at once). */
  converge(row: VmState): Promise<Outcome>;
  log: Logger;
  intervalMs?: number;
}

export class ReconcileLoop {
  private readonly inflight = new Map<string, Promise<void>>();
  private timer?: NodeJS.Timeout;
  private running = false;
  private stopped = false;
  private ticking?: Promise<void>;
  private again = false;
  private scheduled?: NodeJS.Immediate;
  /** VMs that could not proceed: not taken again before `at`, unless their generation changes. */
  private readonly waits = new Map<string, { at: number; attempts: number; generation: string; waitingFor: string }>();
  /** Waiting for the end of the next pass (settled). */
  private passWaiters: Array<() => void> = [];

  constructor(private readonly o: LoopOptions) {}

  /** Whether stop() came first (a start then does nothing). */
  get isStopped(): boolean {
    return this.stopped;
  }

  start(): void {
    if (this.stopped) return;
    this.running = true;
    this.timer = setInterval(() => this.kick(), this.o.intervalMs ?? 1000);
    this.kick();
  }

  /** Stops the loop and waits for actions in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.running = false;
    clearInterval(this.timer);
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    await this.ticking;
    await Promise.allSettled([...this.inflight.values()]);
  }

  /**
   * Runs a pass soon (and another after the current one, if one is going). Never synchronously: a
   * pass starts from the event loop's check phase, so timers, I/O and requests always get a turn.
   */
  kick(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.scheduled ??= setImmediate(() => {
      this.scheduled = undefined;
      if (!this.running || this.ticking) return;
      this.ticking = this.tick()
        .catch((err) => this.o.log.error({ err }, 'reconcile pass failed'))
        .finally(() => {
          this.ticking = undefined;
          for (const passed of this.passWaiters.splice(0)) passed();
          if (this.again) {
            this.again = false;
            this.kick();
          }
        });
    });
  }

  /** Something every waiting VM may have waited for has come (the image): retry them now. */
  wake(): void {
    this.waits.clear();
    this.kick();
  }

  /** What the VMs of this host that cannot proceed yet are waiting for (readiness reports it). */
  waiting(): Array<{ vm_id: string; waiting_for: string; retry_in_ms: number }> {
    const now = Date.now();
    return [...this.waits].map(([vmId, w]) => ({ vm_id: vmId, waiting_for: w.waitingFor, retry_in_ms: Math.max(0, w.at - now) }));
  }

  /** Resolves when no VM of this host needs work and nothing is in flight (tests and benchmarks). */
  async settled(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      await Promise.allSettled([...this.inflight.values()]);
      const rows = await this.o.rows();
      if (this.inflight.size === 0 && !rows.some((r) => this.o.needsWork(r))) return;
      this.kick();
      await this.nextPass(100);
    }
    throw new Error('VMs did not settle in time');
  }

  /** Resolves when the next pass ends (it has started what it acts on), or after `ms` when none comes. */
  private nextPass(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.passWaiters.push(() => (clearTimeout(timer), resolve()));
    });
  }

  private async tick(): Promise<void> {
    const rows = await this.o.rows();
    const now = Date.now();
    for (const row of rows) {
      if (!this.running) return;
      if (this.inflight.has(row.vm_id) || !this.o.needsWork(row)) {
        if (!this.inflight.has(row.vm_id)) this.waits.delete(row.vm_id);
        continue;
      }
      const wait = this.waits.get(row.vm_id);
      if (wait && wait.generation === generation(row) && wait.at > now) continue;
      const p = this.o
        .converge(row)
        .then(
          (outcome) => this.recordOutcome(row, outcome),
          (err) => {
            this.o.log.error({ err, vm_id: row.vm_id }, 'reconcile failed');
            this.recordOutcome(row, { done: false, waitingFor: `a retry after an error: ${(err as Error).message}` });
          },
        )
        .finally(() => {
          this.inflight.delete(row.vm_id);
          this.kick();
        });
      this.inflight.set(row.vm_id, p);
    }
  }

  /** A VM that could not proceed is retried later, each time later (the 1 s loop picks it up when due). */
  private recordOutcome(row: VmState, outcome: Outcome): void {
    if (outcome.done) {
      this.waits.delete(row.vm_id);
      return;
    }
    const previous = this.waits.get(row.vm_id);
    const attempts = previous && previous.generation === generation(row) ? previous.attempts + 1 : 0;
    this.waits.set(row.vm_id, { at: Date.now() + retryDelayMs(attempts), attempts, generation: generation(row), waitingFor: outcome.waitingFor });
  }
}
