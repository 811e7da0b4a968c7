/**
 * Word that something changed: a run has news, a VM has a new status. The writer publishes once its
 * write is committed; whoever waits on that thing wakes and reads it again. In the process that
 * wrote, the news is handed over whole; other processes on the same PostgreSQL hear of it by NOTIFY
 * on the feed's channel, with only what `toWire` puts in the payload.
 */
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Db } from '../store/db.ts';

export interface FeedShape<N> {
  /** The NOTIFY channel. */
  channel: string;
  /** What a piece of news is about (a run id, a VM id): watchers watch one key. */
  key: (news: N) => string;
  /** What of the news crosses to other processes, besides its key. */
  toWire: (news: N) => Record<string, unknown>;
  /** The news another process published, from its key and payload. */
  fromWire: (key: string, wire: Record<string, unknown>) => N;
}

export class Feed<N> {
  private readonly local = new EventEmitter().setMaxListeners(0);
  private readonly origin = randomUUID();
  private listening: Promise<(() => Promise<void>) | null> | null = null;

  constructor(
    private readonly db: Db,
    private readonly shape: FeedShape<N>,
  ) {}

  /** Calls `fn` with each piece of news about `key` until the answer is called. */
  watch(key: string, fn: (news: N) => void): () => void {
    this.listening ??= this.db.listen
      ? this.db.listen(this.shape.channel, (payload) => this.heard(payload)).catch(() => {
          this.listening = null; // watchers poll meanwhile; the next watch tries again
          return null;
        })
      : Promise.resolve(null);
    this.local.on(key, fn);
    return () => void this.local.off(key, fn);
  }

  async publish(news: N): Promise<void> {
    const key = this.shape.key(news);
    this.local.emit(key, news);
    if (this.db.kind === 'postgres') {
      await this.db.query('SELECT pg_notify($1, $2)', [this.shape.channel, JSON.stringify({ ...this.shape.toWire(news), r: key, o: this.origin })]);
    }
  }

  /**
   * Reads `look` until it says the wait is over: again on each piece of news about `key` that `wakes`
   * (all of them by default), and every `pollMs` in any case (news lost with a connection, or sent
   * before the watch began). Gives up after `ms`, or when `signal` aborts, and answers the last
   * reading either way. News that comes while `look` reads makes it read again at once.
   */
  async until<T>(
    key: string,
    look: () => Promise<{ over: boolean; value: T }>,
    opts: { ms: number; pollMs: number; signal?: AbortSignal; wakes?: (news: N) => boolean },
  ): Promise<T> {
    const deadline = Date.now() + opts.ms;
    let news = false;
    let wake: (() => void) | null = null;
    const stop = this.watch(key, (n) => {
      if (opts.wakes && !opts.wakes(n)) return;
      news = true;
      wake?.();
    });
    try {
      for (;;) {
        news = false;
        const seen = await look();
        const left = deadline - Date.now();
        if (seen.over || left <= 0 || opts.signal?.aborted) return seen.value;
        if (news) continue;
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            opts.signal?.removeEventListener('abort', done);
            wake = null;
            resolve();
          };
          const timer = setTimeout(done, Math.min(left, opts.pollMs));
          wake = done;
          opts.signal?.addEventListener('abort', done, { once: true });
        });
      }
    } finally {
      stop();
    }
  }

  private heard(payload: string): void {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(payload) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof msg?.r !== 'string' || msg.o === this.origin) return;
    this.local.emit(msg.r, this.shape.fromWire(msg.r, msg));
  }

  async close(): Promise<void> {
    const stop = await this.listening;
    this.listening = null;
    await stop?.();
  }
}

/** News of a VM: its status or desired state changed (committed). */
export interface VmNews {
  vm_id: string;
}

/** Whoever waits for a VM's status (`GET /v1/api/vms/{id}/wait`) hears of its changes here. */
export class VmFeed extends Feed<VmNews> {
  constructor(db: Db) {
    super(db, { channel: 'agentvm_vms', key: (n) => n.vm_id, toWire: () => ({}), fromWire: (vmId) => ({ vm_id: vmId }) });
  }
}

/** Followers of an image build hear of its log and its end here; `queued` wakes the hosts' builders. */
export class ImageFeed extends Feed<{ image_id: string }> {
  constructor(db: Db) {
    super(db, { channel: 'agentvm_images', key: (n) => n.image_id, toWire: () => ({}), fromWire: (imageId) => ({ image_id: imageId }) });
  }
}
