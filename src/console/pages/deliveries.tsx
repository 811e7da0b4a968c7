import { call, type Schemas } from '../api.ts';
import type { ConsoleApp, ConsoleContext } from '../app.tsx';
import { Status, Time } from '../components.tsx';
import { page } from '../layout.tsx';
import { offsetOf, Table, type Column } from '../table.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { findWebhook, webhookPath } from './webhooks.tsx';

const DELIVERIES_PAGE = 25;

/** Previous and next links over a list that knows only whether more follow. */
function MorePager(props: { base: string; offset: number; size: number; hasMore: boolean; shown: number; label: string }) {
  if (props.offset === 0 && !props.hasMore) return null;
  const link = (o: number) => `${props.base}?offset=${o}`;
  return (
    <nav class="pager" aria-label={props.label}>
      {props.offset > 0 ? <a href={link(Math.max(0, props.offset - props.size))}>← Previous</a> : <span class="disabled">← Previous</span>}
      <span class="muted">{props.shown === 0 ? 'none' : `${props.offset + 1}–${props.offset + props.shown}`}</span>
      {props.hasMore ? <a href={link(props.offset + props.shown)}>Next →</a> : <span class="disabled">Next →</span>}
    </nav>
  );
}

const COLUMNS: Column<Schemas['WebhookDelivery']>[] = [
  {
    label: 'Event',
    cell: (d) => (
      <>
        <code>{d.event_type}</code> <span class="mono muted small">{d.event_id}</span>
      </>
    ),
  },
  { label: 'Status', cell: (d) => <Status status={d.status === 'delivered' ? 'succeeded' : d.status === 'pending' ? 'queued' : 'failed'} label={d.status} /> },
  { label: 'Attempts', cell: (d) => d.attempts },
  {
    label: 'Last answer',
    class: 'wrap-anywhere delivery-answer',
    cell: (d) => (
      <>
        {d.last_status_code !== null ? `HTTP ${d.last_status_code}` : ''}
        {d.last_status_code !== null && d.last_error ? ' · ' : ''}
        {d.last_error ?? ''}
        {d.last_status_code === null && !d.last_error ? '—' : ''}
      </>
    ),
  },
  { label: 'Last attempt', cell: (d) => <Time at={d.last_attempt_at} /> },
  { label: 'Next attempt', cell: (d) => <Time at={d.next_attempt_at} /> },
];

/** One webhook and its delivery log, newest first, in pages. */
async function deliveriesPage(c: ConsoleContext) {
  const session = c.get('session') as ConsoleSession;
  const hook = await findWebhook(c, c.req.param('id')!);
  const offset = offsetOf(c.req.query('offset'));
  const deliveries = await call(
    c.get('api').GET('/v1/api/webhooks/{webhook_id}/deliveries', { params: { path: { webhook_id: hook.webhook_id }, query: { limit: DELIVERIES_PAGE, offset } } }),
  );
  return page(
    c,
    { title: 'Deliveries', section: 'webhooks', session, crumbs: [{ href: '/console/webhooks', label: 'Webhooks' }] },
    <>
      <section class="card stack" aria-labelledby="hook-h">
        <h2 id="hook-h" class="mono wrap-anywhere">
          {hook.url}
        </h2>
        <dl class="facts">
          <dt>Webhook id</dt>
          <dd class="mono">{hook.webhook_id}</dd>
          <dt>Events</dt>
          <dd>{hook.events.join(', ')}</dd>
          <dt>Created</dt>
          <dd>
            <Time at={hook.created_at} />
          </dd>
        </dl>
      </section>
      <section class="card stack" aria-labelledby="deliveries-h">
        <h2 id="deliveries-h">Delivery log</h2>
        {deliveries.data.length === 0 ? (
          <p class="empty">Nothing sent yet: an event of a type it asks for makes a delivery.</p>
        ) : (
          <Table id="delivery-rows" caption="Deliveries, newest first" columns={COLUMNS} rows={deliveries.data} />
        )}
        <MorePager base={webhookPath(hook.webhook_id)} offset={offset} size={DELIVERIES_PAGE} hasMore={deliveries.has_more} shown={deliveries.data.length} label="Delivery pages" />
      </section>
    </>,
  );
}

export function registerDeliveries(app: ConsoleApp) {
  app.get('/webhooks/:id', (c) => deliveriesPage(c));
}
