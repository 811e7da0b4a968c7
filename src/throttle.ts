/**
 * Failed authentications per client address (decisions.md section 14): after 30 in a minute, the address
 * is refused until the minute has passed, before any credential is looked up. The API, the console and a
 * VM host's internal endpoint each count with one. And the rate of requests per key (RateLimiter).
 */
import { DomainError } from './domain/errors.ts';

export const AUTH_FAILURES_MAX = 30;
export const AUTH_FAILURE_WINDOW_MS = 60_000;
const THROTTLE_MAX_ADDRESSES = 100_000;

/**
 * Failures per address in a window that starts at the address's first failure. In memory, per process;
 * an address with no failures costs nothing.
 */
export class FailureThrottle {
  private readonly windows = new Map<string, { start: number; failures: number }>();

  /** Reverse proxies of the operator's (AGENTVM_TRUSTED_PROXIES): behind one, X-Forwarded-For names the client. */
  readonly trustedProxies: ReadonlySet<string>;

  constructor(
    private readonly nowMs: () => number = Date.now,
    private readonly max = AUTH_FAILURES_MAX,
    private readonly windowMs = AUTH_FAILURE_WINDOW_MS,
    trustedProxies: Iterable<string> = [],
  ) {
    this.trustedProxies = new Set([...trustedProxies].map(bareAddress));
  }

  /** The address a request (Node's IncomingMessage) is counted by, behind the trusted proxies (requestAddress). */
  addressOf(req: { socket?: { remoteAddress?: string }; headers?: Record<string, string | string[] | undefined> }): string | null {
    return requestAddress(req.socket?.remoteAddress, req.headers?.['x-forwarded-for'], this.trustedProxies);
  }

  /** 0 when the address may try; else the whole seconds until its window has passed. No address (in process): 0. */
  wait(address: string | null): number {
    if (!address) return 0;
    const w = this.windows.get(address);
    if (!w) return 0;
    const left = w.start + this.windowMs - this.nowMs();
    if (left <= 0) {
      this.windows.delete(address);
      return 0;
    }
    return w.failures >= this.max ? Math.ceil(left / 1000) : 0;
  }

  /** Counts one failed authentication of the address. */
  fail(address: string | null): void {
    if (!address) return;
    const now = this.nowMs();
    const w = this.windows.get(address);
    if (w && now - w.start < this.windowMs) {
      w.failures++;
      return;
    }
    if (!w && this.windows.size >= THROTTLE_MAX_ADDRESSES) this.prune(now);
    this.windows.set(address, { start: now, failures: 1 });
  }

  /** Refuses a throttled address: throws the 429 to answer. */
  check(address: string | null): void {
    const wait = this.wait(address);
    if (wait > 0) throw throttledError(wait);
  }

  private prune(now: number): void {
    for (const [a, w] of this.windows) if (now - w.start >= this.windowMs) this.windows.delete(a);
    // Still full (a flood from that many addresses at once): the oldest windows go first.
    for (const a of this.windows.keys()) {
      if (this.windows.size < THROTTLE_MAX_ADDRESSES) break;
      this.windows.delete(a);
    }
  }
}

/**
 * The key an address is counted by: an IPv4 address as itself (also when it comes IPv4-mapped), an IPv6
 * address by its /64, since one machine usually holds a whole /64.
 */
export function addressKey(remote: string | undefined | null): string | null {
  if (!remote) return null;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remote);
  if (mapped) return mapped[1];
  if (!remote.includes(':')) return remote;
  const bare = remote.split('%')[0].toLowerCase();
  let groups = bare.split(':');
  if (bare.includes('::')) {
    const [head, tail] = bare.split('::');
    const left = head ? head.split(':') : [];
    const right = tail ? tail.split(':') : [];
    groups = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  }
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** An address as written, IPv4-mapped ones as IPv4. */
const bareAddress = (a: string) => {
  const t = a.trim();
  return /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(t)?.[1] ?? t.toLowerCase();
};

/**
 * The key of the client a request comes from: its socket's peer, or, when that peer is a reverse
 * proxy in `trusted`, the last address in X-Forwarded-For that is not one (each proxy appends the
 * address it heard from; what comes before is the client's own word). Behind an untrusted peer the
 * header is not read: anyone could write it.
 */
export function requestAddress(remote: string | undefined | null, forwardedFor: string | string[] | undefined, trusted: ReadonlySet<string>): string | null {
  if (!remote || !trusted.has(bareAddress(remote))) return addressKey(remote);
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : (forwardedFor ?? '')).split(',').map(bareAddress).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!trusted.has(hops[i])) return addressKey(hops[i]);
  return addressKey(remote);
}

/** The key of a request's client (Node's IncomingMessage in the env; see requestAddress); null for a request made in process. */
export function clientAddress(env: unknown, trusted: ReadonlySet<string> = new Set()): string | null {
  const incoming = (env as { incoming?: { socket?: { remoteAddress?: string }; headers?: Record<string, string | string[] | undefined> } } | undefined)?.incoming;
  return requestAddress(incoming?.socket?.remoteAddress, incoming?.headers?.['x-forwarded-for'], trusted);
}

/** The answer to an address over its failures. */
export function throttledError(waitSeconds: number): DomainError {
  return new DomainError('rate_limited', 'too many failed authentications from this address', `retry after ${waitSeconds} s`, {
    'Retry-After': String(waitSeconds),
  });
}

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
