/**
 * Each tenant's feed of what happened: an event is written in the transaction of the change it
 * reports (so it exists exactly when the change does), with the object as the API presented it then,
 * and one pending webhook delivery per webhook that asked for its type. Kept 30 days.
 *
 * Lock order: an event takes its tenant's counter row, so it is recorded last in its transaction,
 * after every VM row the transaction locks (two transactions never wait on each other in a circle).
 */
import { EventEmitter } from 'node:events';
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { invalid } from './errors.ts';
import { randomBase62 } from './ids.ts';
import * as eventStore from '../store/events.ts';
import * as webhookStore from '../store/webhooks.ts';
import * as ledgerStore from '../store/ledger.ts';
import * as runStore from '../store/runs.ts';
import * as templateStore from '../store/templates.ts';
import type { EventRow } from '../store/events.ts';
import type { VmRecord, VmRow } from '../store/vms.ts';
import type { KeyRecord } from './keys.ts';
import { iso, presentKey, presentRun, presentTemplate, presentVm } from './present.ts';

import { EVENT_TYPES, type EventType } from './eventTypes.ts';
export { EVENT_TYPES, type EventType };

export const EVENT_RETENTION_MS = 30 * 24 * 3600_000;
/** credits.low: the balance falls below this (and again when it reaches zero). */
export const LOW_CREDITS_CENTS = 100;

/** In-process news that events were written: this process's webhook sender looks at once. */
export const eventNews = new EventEmitter();
eventNews.setMaxListeners(0);

/** The first instant of the calendar month (UTC) `now` is in. */
export const monthStart = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));

/** Event ids carry their tenant sequence number (base 36, 10 digits) before a random part: a cursor outlives its event. */
const EVENT_ID = /^evt_([0-9a-z]{10})[A-Za-z0-9]{12}$/;
const eventId = (seq: number) => `evt_${seq.toString(36).padStart(10, '0')}${randomBase62(12)}`;

/** Writes one event in `tx` and queues its webhook deliveries; answers its id. */
export async function recordEvent(tx: Queryable, tenantId: string, type: EventType, data: unknown, now: Date): Promise<string> {
  const seq = await eventStore.nextSeq(tx, tenantId);
  const id = eventId(seq);
  await eventStore.insert(tx, { event_id: id, tenant_id: tenantId, seq, type, data, created_at: now });
  const queued = await webhookStore.enqueueForEvent(tx, tenantId, id, type, now);
  // After the commit, most likely: a sender that looks too early finds it on its next look.
  if (queued > 0) setTimeout(() => eventNews.emit('queued'), 1).unref();
  return id;
}

/** VMs with their cost so far this calendar month, from the ledger. */
export async function withMonthCosts<T extends VmRow>(q: Queryable, tenantId: string, rows: T[], now: Date): Promise<T[]> {
  const costs = await ledgerStore.vmCostsSince(q, tenantId, rows.map((r) => r.vm_id), monthStart(now));
  for (const row of rows) row.cost_cents_month = costs.get(row.vm_id) ?? 0;
  return rows;
}

const VM_EVENT: Partial<Record<string, EventType>> = {
  running: 'vm.running',
  stopped: 'vm.stopped',
  failed: 'vm.failed',
  deleted: 'vm.deleted',
};

/**
 * Records the event of a VM's status change (created, running, stopped, failed, deleted), if its
 * status changed into one of those since `before` (null: the VM is new). Call last in the transaction.
 */
export async function recordVmChange(tx: Queryable, before: { status: string } | null, vmId: string, now: Date): Promise<void> {
  const [after] = await tx.query<VmRecord>('SELECT * FROM vms WHERE vm_id = $1', [vmId]);
  if (!after || (before && before.status === after.status)) return;
  const type = before ? VM_EVENT[after.status] : 'vm.created';
  if (!type) return;
  const [priced] = await withMonthCosts(tx, after.tenant_id, [after], now);
  await recordEvent(tx, after.tenant_id, type, presentVm(priced), now);
}

/** run.finished, with the run as the API presents it. */
export async function recordRunFinished(tx: Queryable, runId: string, now: Date): Promise<void> {
  const run = await runStore.byId(tx, runId);
  const [owner] = await tx.query<{ tenant_id: string }>('SELECT tenant_id FROM runs WHERE run_id = $1', [runId]);
  if (!run || !owner) return;
  await recordEvent(tx, owner.tenant_id, 'run.finished', presentRun(run), now);
}

/** template.ready or template.failed, for the template's owner. */
export async function recordTemplateOutcome(tx: Queryable, templateId: string, now: Date): Promise<void> {
  const t = await templateStore.byId(tx, templateId);
  if (!t?.tenant_id || (t.status !== 'ready' && t.status !== 'failed')) return;
  await recordEvent(tx, t.tenant_id, t.status === 'ready' ? 'template.ready' : 'template.failed', presentTemplate(t, t.tenant_id), now);
}

export async function recordKeyIssued(tx: Queryable, tenantId: string, key: KeyRecord, now: Date): Promise<void> {
  await recordEvent(tx, tenantId, 'key.issued', presentKey(key), now);
}

export async function recordKeyRevoked(tx: Queryable, tenantId: string, key: KeyRecord, now: Date): Promise<void> {
  await recordEvent(tx, tenantId, 'key.revoked', { ...presentKey(key), revoked_at: key.revoked_at ? iso(key.revoked_at) : null }, now);
}

/** credits.low when a draw took the balance below LOW_CREDITS_CENTS, or to zero. Call last in the transaction. */
export async function recordCreditsLow(tx: Queryable, tenantId: string, before: number, after: number, now: Date): Promise<void> {
  const crossed = (before >= LOW_CREDITS_CENTS && after < LOW_CREDITS_CENTS) || (before > 0 && after <= 0);
  if (!crossed) return;
  const [t] = await tx.query<{ card_brand: string | null; card_last4: string | null }>('SELECT card_brand, card_last4 FROM tenants WHERE tenant_id = $1', [
    tenantId,
  ]);
  const billing = { card_on_file: t?.card_last4 != null, brand: t?.card_brand ?? null, last4: t?.card_last4 ?? null, credits_cents: after };
  await recordEvent(tx, tenantId, 'credits.low', billing, now);
}

export interface PresentedEvent {
  event_id: string;
  type: string;
  created_at: string;
  data: unknown;
}

export const presentEvent = (e: Pick<EventRow, 'event_id' | 'type' | 'created_at' | 'data'>): PresentedEvent => ({
  event_id: e.event_id,
  type: e.type,
  created_at: iso(new Date(e.created_at)),
  data: e.data,
});

/** The feed: read, and pruned after 30 days. */
export class EventService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** The tenant's events after the cursor (an event id), oldest first. */
  async list(tenantId: string, after: string | undefined, limit: number): Promise<{ data: PresentedEvent[]; has_more: boolean }> {
    let seq = 0;
    if (after !== undefined) {
      const m = EVENT_ID.exec(after);
      if (!m) throw invalid('after', 'must be an event id (evt_…) from this feed');
      seq = Number.parseInt(m[1], 36);
    }
    const rows = await eventStore.listAfter(this.db, tenantId, seq, limit + 1);
    return { data: rows.slice(0, limit).map(presentEvent), has_more: rows.length > limit };
  }

  /** Removes events older than 30 days; answers how many went. */
  prune(): Promise<number> {
    return eventStore.pruneBefore(this.db, new Date(this.clock.now().getTime() - EVENT_RETENTION_MS));
  }
}
