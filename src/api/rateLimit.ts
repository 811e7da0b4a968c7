/** A token bucket per key: `perSecond` sustained, `burst` at once. In memory, per process. */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly nowMs: () => number,
  ) {}

  /** Takes one token; answers 0 when allowed, else the whole seconds to wait. */
  take(key: string): number {
    const now = this.nowMs();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    if (!this.buckets.has(key) && this.buckets.size >= 10_000) this.prune(now);
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond));
  }

  /** Forgets buckets that have refilled: they hold nothing a fresh bucket would not. */
  private prune(now: number): void {
    for (const [key, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key);
    }
  }
}
