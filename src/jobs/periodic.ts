import type { Logger } from '../log.ts';

/**
 * Work done on a timer, one pass at a time: a tick while a pass runs joins it; `stop` waits for it.
 * The timer never keeps the process alive.
 */
export abstract class PeriodicJob {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  protected constructor(
    private readonly job: { log: Logger; intervalMs?: number },
    /** What the log says when a pass fails. */
    private readonly failure: string,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.job.intervalMs ?? 5000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass (tests call it directly). */
  tick(): Promise<void> {
    this.running ??= this.pass()
      .catch((err) => this.job.log.error({ err }, this.failure))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  protected abstract pass(): Promise<void>;
}
