/**
 * Sends webhook deliveries in the background, never in a request's way. Every process may run one:
 * a delivery is claimed for one attempt by moving its next attempt past the attempt's timeout (SKIP
 * LOCKED), so each attempt happens once, and a sender killed mid-attempt leaves it to be tried again
 * soon after. A webhook's deliveries go one at a time, oldest first; webhooks go side by side, so a
 * slow or dead receiver delays only its own events.
 *
 * Each attempt resolves the URL's host, refuses private, loopback and link-local addresses (unless
 * the operator allowed the host), and connects to the address it checked: no DNS rebinding.
 */
import http from 'node:http';
import https from 'node:https';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { createHmac } from 'node:crypto';
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';
import * as webhookStore from '../store/webhooks.ts';
import type { ClaimedDelivery } from '../store/webhooks.ts';
import { eventNews, presentEvent } from '../domain/events.ts';
import { addressProblem } from '../domain/webhooks.ts';

export interface WebhookSenderOptions {
  db: Db;
  clock: Clock;
  log: Logger;
  /** Hosts allowed http and private addresses (AGENTVM_WEBHOOK_ALLOW_HOSTS). */
  allowHosts: Set<string>;
  /** No answer within this is a failed attempt (10 s). */
  timeoutMs?: number;
  /** The first retry comes after about this long, each next one twice as late (jittered), up to `retryMaxMs`. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Retries stop this long after the event (24 h): the delivery is `failed`. */
  giveUpAfterMs?: number;
  /** Webhooks sent to at once by this process. */
  concurrency?: number;
  /** How often it looks for due deliveries besides being woken. */
  pollMs?: number;
}

/** The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** The delay before attempt `attempt + 1` after `attempt` failures: exponential, capped, ±50 % jitter. */
export function retryDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exp = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.5 + random()));
}

interface Outcome {
  statusCode: number | null;
  error: string | null;
}

export class WebhookSender {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private passing = false;
  private again = false;
  /** Webhooks this process is sending to, each by one chain. */
  private readonly busy = new Map<string, Promise<void>>();
  private readonly wake = () => this.kick();

  constructor(private readonly o: WebhookSenderOptions) {}

  private get timeoutMs() {
    return this.o.timeoutMs ?? 10_000;
  }

  start(): void {
    eventNews.on('queued', this.wake);
    this.timer = setInterval(() => this.kick(), this.o.pollMs ?? 500);
    this.timer.unref();
    this.kick();
  }

  /** Stops taking deliveries and waits for attempts under way (each ends within its timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    eventNews.off('queued', this.wake);
    clearInterval(this.timer);
    await Promise.allSettled([...this.busy.values()]);
  }

  /** Looks for due deliveries soon. */
  kick(): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = true;
    void this.pass()
      .catch((err) => this.o.log.warn({ err }, 'looking for webhook deliveries failed'))
      .finally(() => {
        this.passing = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Starts a chain for each webhook with a due delivery that no chain here serves yet. */
  private async pass(): Promise<void> {
    const room = (this.o.concurrency ?? 32) - this.busy.size;
    if (room <= 0) return;
    const webhooks = await webhookStore.webhooksWithDue(this.o.db, this.o.clock.now(), [...this.busy.keys()], room);
    for (const webhookId of webhooks) {
      if (this.stopped || this.busy.has(webhookId)) continue;
      const chain = this.serve(webhookId)
        .catch((err) => this.o.log.warn({ err, webhook_id: webhookId }, 'sending webhook deliveries failed'))
        .finally(() => {
          this.busy.delete(webhookId);
          this.kick();
        });
      this.busy.set(webhookId, chain);
    }
  }

  /** Sends the webhook's due deliveries one after another until none is due. */
  private async serve(webhookId: string): Promise<void> {
    while (!this.stopped) {
      const now = this.o.clock.now();
      const claimed = await webhookStore.claimNext(this.o.db, webhookId, now, new Date(now.getTime() + this.timeoutMs + 5000));
      if (!claimed) return;
      await this.attempt(claimed);
    }
  }

  private async attempt(d: ClaimedDelivery): Promise<void> {
    const body = JSON.stringify(presentEvent({ event_id: d.event_id, type: d.event_type, created_at: d.event_created_at, data: d.event_data }));
    const started = this.o.clock.now();
    const outcome = await this.post(d, body, Math.floor(started.getTime() / 1000));
    const at = this.o.clock.now();
    const delivered = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300;
    let nextAttemptAt: Date | null = null;
    if (!delivered) {
      const next = at.getTime() + retryDelayMs(d.attempts + 1, this.o.retryBaseMs ?? 10_000, this.o.retryMaxMs ?? 3600_000);
      if (next < new Date(d.created_at).getTime() + (this.o.giveUpAfterMs ?? 24 * 3600_000)) nextAttemptAt = new Date(next);
    }
    await webhookStore.recordAttempt(this.o.db, d.delivery_id, { at, statusCode: outcome.statusCode, error: outcome.error, delivered, nextAttemptAt });
    if (!delivered && !nextAttemptAt) this.o.log.warn({ delivery_id: d.delivery_id, webhook_id: d.webhook_id }, 'webhook delivery failed for good after 24 hours');
  }

  /** One POST: the host's address checked, then connected to as checked. */
  private async post(d: ClaimedDelivery, body: string, unixSeconds: number): Promise<Outcome> {
    let url: URL;
    try {
      url = new URL(d.url);
    } catch {
      return { statusCode: null, error: 'the URL is not valid' };
    }
    const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, '');
    const allowed = this.o.allowHosts.has(host);
    if (url.protocol !== 'https:' && !(allowed && url.protocol === 'http:')) return { statusCode: null, error: 'the URL must use https' };
    let address: { address: string; family: number };
    try {
      const found = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true, verbatim: true });
      if (found.length === 0) return { statusCode: null, error: `${host} has no address` };
      if (!allowed) {
        for (const a of found) {
          const problem = addressProblem(a.address);
          if (problem) return { statusCode: null, error: `${host} resolves to ${a.address}, a ${problem} address: refused` };
        }
      }
      address = found[0];
    } catch (err) {
      return { statusCode: null, error: `resolving ${host} failed: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
    }
    const pinned: LookupFunction = (_name, opts, cb) => {
      if ((opts as { all?: boolean }).all) (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [address]);
      else cb(null, address.address, address.family);
    };
    const client = url.protocol === 'https:' ? https : http;
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const finish = (o: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(o);
      };
      const req = client.request(
        url,
        {
          method: 'POST',
          lookup: pinned,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'user-agent': 'agentvm-webhooks/1',
            'agentvm-signature': signatureHeader(d.secret, body, unixSeconds),
            'agentvm-event-id': d.event_id,
            'agentvm-event-type': d.event_type,
          },
        },
        (res) => {
          // The answer's body is not kept: read (up to a limit) and dropped.
          let read = 0;
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > 64 * 1024) res.destroy();
          });
          res.on('end', () => finish({ statusCode: res.statusCode ?? null, error: (res.statusCode ?? 0) >= 300 ? `answered ${res.statusCode}` : null }));
          res.on('close', () => finish({ statusCode: res.statusCode ?? null, error: (res.statusCode ?? 0) >= 300 ? `answered ${res.statusCode}` : null }));
          res.on('error', () => undefined);
        },
      );
      const timer = setTimeout(() => {
        finish({ statusCode: null, error: `no answer within ${this.timeoutMs} ms` });
        req.destroy();
      }, this.timeoutMs);
      req.on('error', (err: NodeJS.ErrnoException) => finish({ statusCode: null, error: `${err.code ?? 'error'}: ${err.message}`.slice(0, 300) }));
      req.end(body);
    });
  }
}
