/**
 * Webhooks: where a tenant wants its events POSTed, and the log of each delivery. A URL must be https
 * to a public address; hosts the operator names in AGENTVM_WEBHOOK_ALLOW_HOSTS may also use http and
 * private or loopback addresses (tests, split-horizon setups). The address a name resolves to is
 * checked again at every delivery (src/jobs/webhookSender.ts), so a name that later resolves to a
 * private address gets nothing.
 */
import { isIP } from 'node:net';
import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { invalid, notFound } from './errors.ts';
import { randomBase62 } from './ids.ts';
import { EVENT_TYPES, type EventType } from './eventTypes.ts';
import { DenyList } from '../net/denyList.ts';
import * as webhookStore from '../store/webhooks.ts';
import type { DeliveryRow, WebhookRow } from '../store/webhooks.ts';
import { requireQuota } from './limits.ts';

/** The operator's exceptions to the public-https rule: lowercase host names (AGENTVM_WEBHOOK_ALLOW_HOSTS). */
export function parseAllowHosts(raw: string | undefined): Set<string> {
  return new Set(
    (raw ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase().replace(/^\[|\]$/g, ''))
      .filter(Boolean),
  );
}

const denyList = new DenyList();

/** Why an address may not receive webhooks, or null when it may. */
export function addressProblem(address: string): string | null {
  return denyList.reason(address);
}

/** Checks a webhook URL as far as it can be without a DNS look-up (that comes at delivery); answers it normalised. */
export function checkWebhookUrl(raw: string, allowHosts: Set<string>): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('url', 'must be an absolute https URL');
  }
  if (url.username || url.password) throw invalid('url', 'must not carry a user name or password');
  const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, '');
  const allowed = allowHosts.has(host);
  if (url.protocol !== 'https:' && !(allowed && url.protocol === 'http:')) throw invalid('url', 'must use https');
  if (allowed) return url;
  if (isIP(host)) {
    const problem = denyList.reason(host);
    if (problem) throw invalid('url', `must point at a public address, not a ${problem} one`);
  } else if (!host.includes('.') || host === 'localhost' || host.endsWith('.localhost') || host.endsWith('.local') || host.endsWith('.internal')) {
    throw invalid('url', 'must name a public host');
  }
  return url;
}

export function checkEventTypes(types: string[]): EventType[] {
  const known = new Set<string>(EVENT_TYPES);
  types.forEach((t, i) => {
    if (!known.has(t)) throw invalid(`events.${i}`, `unknown event type "${t}"; known: ${EVENT_TYPES.join(', ')}`);
  });
  return [...new Set(types)] as EventType[];
}

export class WebhookService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly allowHosts: Set<string>,
  ) {}

  /** A new webhook with its signing secret (the only time the secret is shown). */
  async create(tenantId: string, input: { url: string; events: string[] }): Promise<WebhookRow> {
    const url = checkWebhookUrl(input.url, this.allowHosts);
    const events = checkEventTypes(input.events);
    return this.db.transaction(async (tx) => {
      await requireQuota(tx, tenantId, { webhooks: 1 }, this.clock.now());
      return webhookStore.insert(tx, {
        webhook_id: `wh_${randomBase62(22)}`,
        tenant_id: tenantId,
        url: url.toString(),
        events,
        secret: `whsec_${randomBase62(40)}`,
        created_at: this.clock.now(),
      });
    });
  }

  list(tenantId: string): Promise<WebhookRow[]> {
    return webhookStore.listForTenant(this.db, tenantId);
  }

  /** Deletes a webhook; its pending deliveries are not sent. */
  async remove(tenantId: string, webhookId: string): Promise<WebhookRow> {
    const row = await webhookStore.remove(this.db, tenantId, webhookId);
    if (!row) throw notFound('webhook');
    return row;
  }

  /** A webhook's deliveries, newest first. */
  async deliveries(tenantId: string, webhookId: string, limit: number, offset: number): Promise<{ rows: DeliveryRow[]; has_more: boolean }> {
    if (!(await webhookStore.getForTenant(this.db, tenantId, webhookId))) throw notFound('webhook');
    const rows = await webhookStore.listDeliveries(this.db, tenantId, webhookId, limit + 1, offset);
    return { rows: rows.slice(0, limit), has_more: rows.length > limit };
  }
}
