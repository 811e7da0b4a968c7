/**
 * Word that a run has news: output stored, or its end. The VM's host publishes once its write is
 * committed; whoever follows the run (an event stream, a run waited on) wakes and reads on. In the
 * process that wrote, the news carries the stored events themselves (many watchers of one run cost no
 * query each); other processes on the same PostgreSQL hear of it by NOTIFY and read the rows.
 */
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Db } from '../store/db.ts';
import type { RunEventRow } from '../store/runs.ts';

export interface RunNews {
  run_id: string;
  /** Events just stored, in order (absent when the news came from another process). */
  events?: RunEventRow[];
  /** The run ended (or news from another process: it may have). */
  finished?: boolean;
}

const CHANNEL = 'agentvm_runs';

export class RunFeed {
  private readonly local = new EventEmitter().setMaxListeners(0);
  private readonly origin = randomUUID();
  private listening: Promise<(() => Promise<void>) | null> | null = null;

  constructor(private readonly db: Db) {}

  /** Calls `fn` with each piece of news of the run until the answer is called. */
  watch(runId: string, fn: (news: RunNews) => void): () => void {
    this.listening ??= this.db.listen
      ? this.db.listen(CHANNEL, (payload) => this.heard(payload)).catch(() => {
          this.listening = null; // watchers poll meanwhile; the next watch tries again
          return null;
        })
      : Promise.resolve(null);
    this.local.on(runId, fn);
    return () => void this.local.off(runId, fn);
  }

  async publish(news: RunNews): Promise<void> {
    this.local.emit(news.run_id, news);
    if (this.db.kind === 'postgres') {
      await this.db.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ r: news.run_id, o: this.origin, f: news.finished === true })]);
    }
  }

  private heard(payload: string): void {
    let msg: { r?: unknown; o?: unknown; f?: unknown };
    try {
      msg = JSON.parse(payload) as typeof msg;
    } catch {
      return;
    }
    if (typeof msg.r !== 'string' || msg.o === this.origin) return;
    this.local.emit(msg.r, { run_id: msg.r, finished: msg.f === true || undefined });
  }

  async close(): Promise<void> {
    const stop = await this.listening;
    this.listening = null;
    await stop?.();
  }
}
