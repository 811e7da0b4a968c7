import { call, ClientError, type Schemas } from '../api.ts';
import type { ConsoleApp, ConsoleContext, ConsoleDeps } from '../app.tsx';
import { noticeFor, Pager, Status, Time } from '../components.tsx';
import { money } from '../format.ts';
import { Csrf, page } from '../layout.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { EVENT_TYPES } from '../../domain/eventTypes.ts';

const EVENTS_PAGE = 50;
const DELIVERIES_PAGE = 25;
const LEDGER_PAGE = 25;

const offsetOf = (raw: string | undefined) => Math.min(1_000_000_000, Math.max(0, Number.parseInt(raw ?? '0', 10) || 0));
const webhookPath = (id: string) => `/console/webhooks/${encodeURIComponent(id)}`;

/** What an event is about: the id of the object it carries (a VM, a run, a template, a key), as text. */
function subjectOf(e: Schemas['Event']): string {
  const d = e.data as Record<string, unknown>;
  for (const k of ['vm_id', 'run_id', 'template_id', 'key_id']) if (typeof d[k] === 'string') return d[k] as string;
  return '';
}

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

async function eventsPage(c: ConsoleContext) {
  const session = c.get('session') as ConsoleSession;
  const after = c.req.query('after') || undefined;
  const events = await call(c.get('api').GET('/v1/api/events', { params: { query: { after, limit: EVENTS_PAGE } } }));
  const last = events.data.at(-1)?.event_id;
  return page(
    c,
    { title: 'Events', section: 'events', session },
    <section class="card stack" aria-labelledby="events-h">
      <div class="section-head">
        <h2 id="events-h">{after ? 'Events after the previous page' : 'Events of the last 30 days'}</h2>
        <span class="muted small">oldest first</span>
      </div>
      {events.data.length === 0 ? (
        <p class="empty">{after ? 'Nothing newer yet.' : 'No events yet. Creating, stopping or deleting a VM, a finished run, a key issued: each writes one.'}</p>
      ) : (
        <div class="table-wrap">
          <table class="table responsive" id="event-rows">
            <caption class="visually-hidden">Events, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Type</th>
                <th scope="col">About</th>
                <th scope="col">Event id</th>
                <th scope="col">Data</th>
              </tr>
            </thead>
            <tbody>
              {events.data.map((e) => (
                <tr>
                  <td data-label="When">
                    <Time at={e.created_at} />
                  </td>
                  <td data-label="Type">
                    <code>{e.type}</code>
                  </td>
                  <td data-label="About" class="mono">
                    {subjectOf(e) || '—'}
                  </td>
                  <td data-label="Event id" class="mono">
                    {e.event_id}
                  </td>
                  <td data-label="Data">
                    <details>
                      <summary>Show</summary>
                      <pre class="task-text event-data">{JSON.stringify(e.data, null, 2)}</pre>
                    </details>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <nav class="pager" aria-label="Event pages">
        {after ? <a href="/console/events">← From the start</a> : <span class="disabled">← From the start</span>}
        {events.has_more && last ? (
          <a href={`/console/events?after=${encodeURIComponent(last)}`}>Newer →</a>
        ) : last ? (
          <a href={`/console/events?after=${encodeURIComponent(last)}`}>Check for newer →</a>
        ) : (
          <span class="disabled">Newer →</span>
        )}
      </nav>
    </section>,
  );
}

async function webhooksPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number; created?: Schemas['CreatedWebhook']; form?: { url: string; events: string[] } } = {}) {
  const session = c.get('session') as ConsoleSession;
  const hooks = await call(c.get('api').GET('/v1/api/webhooks'));
  const checked = new Set(opts.form?.events ?? []);
  return page(
    c,
    { title: 'Webhooks', section: 'webhooks', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <>
      {opts.created ? (
        <section class="card stack issued" aria-labelledby="created-h">
          <h2 id="created-h">Your new webhook</h2>
          <p>
            Events go to <span class="mono">{opts.created.url}</span>. Copy its signing secret now: <strong>this is the only time it is shown.</strong>
          </p>
          <label for="webhook-secret">Signing secret</label>
          <div class="copy-row">
            <input id="webhook-secret" class="mono" readonly value={opts.created.secret} data-select-on-focus="" />
            <button type="button" class="button small" data-copy="webhook-secret">
              Copy
            </button>
          </div>
          <p class="muted small">
            Each delivery carries <code>agentvm-signature: t=…,v1=…</code>: the hex HMAC-SHA256 of <code>t.body</code> with this secret.
          </p>
        </section>
      ) : null}
      <section class="card" aria-labelledby="hooks-h">
        <h2 id="hooks-h">Your webhooks</h2>
        {hooks.data.length === 0 ? (
          <p class="empty">No webhooks.</p>
        ) : (
          <div class="table-wrap">
            <table class="table responsive" id="webhook-rows">
              <caption class="visually-hidden">Webhooks, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">URL</th>
                  <th scope="col">Events</th>
                  <th scope="col">Created</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {hooks.data.map((w) => (
                  <tr>
                    <td data-label="URL" class="mono wrap-anywhere">
                      {w.url}
                    </td>
                    <td data-label="Events">{w.events.join(', ')}</td>
                    <td data-label="Created">
                      <Time at={w.created_at} />
                    </td>
                    <td data-label="Actions" class="row-actions">
                      <div class="button-row end">
                        <a class="button small" href={webhookPath(w.webhook_id)} aria-label={`Deliveries of ${w.url}`}>
                          Deliveries
                        </a>
                        <a class="button small danger-ghost" href={`${webhookPath(w.webhook_id)}/delete`} aria-label={`Delete webhook ${w.url}`}>
                          Delete…
                        </a>
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <section class="card stack" aria-labelledby="new-hook-h">
        <h2 id="new-hook-h">Add a webhook</h2>
        <form class="stack" method="post" action="/console/webhooks">
          <Csrf session={session} />
          <div class="field">
            <label for="hook-url">URL</label>
            <input id="hook-url" name="url" type="url" required maxlength={2048} placeholder="https://example.com/agentvm-events" value={opts.form?.url ?? ''} />
            <span class="muted small">https, to a public address; each event is POSTed as JSON and retried for 24 hours until a 2xx.</span>
          </div>
          <fieldset class="field">
            <legend>Events to send</legend>
            <div class="checks">
              {EVENT_TYPES.map((t) => (
                <label class="check">
                  <input type="checkbox" name="events" value={t} checked={opts.form ? checked.has(t) : true} /> <code>{t}</code>
                </label>
              ))}
            </div>
          </fieldset>
          <div class="button-row">
            <button type="submit" class="button primary">
              Add webhook
            </button>
          </div>
        </form>
      </section>
    </>,
  );
}

async function findWebhook(c: ConsoleContext, id: string): Promise<Schemas['Webhook']> {
  const hooks = await call(c.get('api').GET('/v1/api/webhooks'));
  const hook = hooks.data.find((w) => w.webhook_id === id);
  if (!hook) throw new ClientError('not_found', 'no such webhook', 'it may have been deleted', 404);
  return hook;
}

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
          <div class="table-wrap">
            <table class="table responsive" id="delivery-rows">
              <caption class="visually-hidden">Deliveries, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Event</th>
                  <th scope="col">Status</th>
                  <th scope="col">Attempts</th>
                  <th scope="col">Last answer</th>
                  <th scope="col">Last attempt</th>
                  <th scope="col">Next attempt</th>
                </tr>
              </thead>
              <tbody>
                {deliveries.data.map((d) => (
                  <tr>
                    <td data-label="Event">
                      <code>{d.event_type}</code> <span class="mono muted small">{d.event_id}</span>
                    </td>
                    <td data-label="Status">
                      <Status status={d.status === 'delivered' ? 'succeeded' : d.status === 'pending' ? 'queued' : 'failed'} label={d.status} />
                    </td>
                    <td data-label="Attempts">{d.attempts}</td>
                    <td data-label="Last answer" class="wrap-anywhere delivery-answer">
                      {d.last_status_code !== null ? `HTTP ${d.last_status_code}` : ''}
                      {d.last_status_code !== null && d.last_error ? ' · ' : ''}
                      {d.last_error ?? ''}
                      {d.last_status_code === null && !d.last_error ? '—' : ''}
                    </td>
                    <td data-label="Last attempt">
                      <Time at={d.last_attempt_at} />
                    </td>
                    <td data-label="Next attempt">
                      <Time at={d.next_attempt_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <MorePager base={webhookPath(hook.webhook_id)} offset={offset} size={DELIVERIES_PAGE} hasMore={deliveries.has_more} shown={deliveries.data.length} label="Delivery pages" />
      </section>
    </>,
  );
}

const LEDGER_KINDS: Record<string, string> = { card_charge: 'Card charge', credit_purchase: 'Credits bought', credit_draw: 'Credits drawn' };

async function ledgerPage(c: ConsoleContext) {
  const session = c.get('session') as ConsoleSession;
  const offset = offsetOf(c.req.query('offset'));
  const ledger = await call(c.get('api').GET('/v1/api/billing/ledger', { params: { query: { limit: LEDGER_PAGE, offset } } }));
  return page(
    c,
    { title: 'Ledger', section: 'billing', session, crumbs: [{ href: '/console/billing', label: 'Billing' }] },
    <section class="card stack" aria-labelledby="ledger-h">
      <div class="section-head">
        <h2 id="ledger-h">Every charge, credit purchase and draw</h2>
        <span class="muted small">newest first; a correction is a new entry</span>
      </div>
      {ledger.data.length === 0 ? (
        <p class="empty">Nothing in the ledger yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="table responsive" id="ledger-rows">
            <caption class="visually-hidden">Ledger entries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Kind</th>
                <th scope="col">Description</th>
                <th scope="col">For</th>
                <th scope="col">Amount</th>
                <th scope="col">Credits</th>
              </tr>
            </thead>
            <tbody>
              {ledger.data.map((e) => (
                <tr>
                  <td data-label="When">
                    <Time at={e.created_at} />
                  </td>
                  <td data-label="Kind">{LEDGER_KINDS[e.kind] ?? e.kind}</td>
                  <td data-label="Description" class="wrap-anywhere">
                    {e.description}
                  </td>
                  <td data-label="For" class="mono">
                    {e.vm_id ? <a href={`/console/vms/${encodeURIComponent(e.vm_id)}`}>{e.vm_id}</a> : (e.template_id ?? '—')}
                  </td>
                  <td data-label="Amount">{money(e.amount_cents)}</td>
                  <td data-label="Credits">{e.credits_delta_cents === 0 ? '—' : `${e.credits_delta_cents > 0 ? '+' : ''}${money(e.credits_delta_cents)}`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager base="/console/billing/ledger" param="offset" offset={offset} size={LEDGER_PAGE} total={ledger.total} label="Ledger pages" />
    </section>,
  );
}

export function registerActivity(app: ConsoleApp, _deps: ConsoleDeps) {
  app.get('/events', (c) => eventsPage(c));
  app.get('/billing/ledger', (c) => ledgerPage(c));

  app.get('/webhooks', (c) => webhooksPage(c));
  app.post('/webhooks', async (c) => {
    const form = await c.req.parseBody({ all: true });
    const url = typeof form.url === 'string' ? form.url.trim() : '';
    const raw = form.events;
    const events = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).filter((e): e is string => typeof e === 'string');
    try {
      const created = await call(c.get('api').POST('/v1/api/webhooks', { body: { url, events } }));
      return webhooksPage(c, { created, status: 201 });
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return webhooksPage(c, { problem: err, status: err.status, form: { url, events } });
    }
  });
  app.get('/webhooks/:id', (c) => deliveriesPage(c));
  app.get('/webhooks/:id/delete', async (c) => {
    const session = c.get('session') as ConsoleSession;
    const hook = await findWebhook(c, c.req.param('id')!);
    return page(
      c,
      { title: 'Delete this webhook?', section: 'webhooks', session, crumbs: [{ href: '/console/webhooks', label: 'Webhooks' }] },
      <form class="card narrow stack danger-zone" method="post" action={`${webhookPath(hook.webhook_id)}/delete`}>
        <Csrf session={session} />
        <p>
          Events will no longer be sent to <strong class="mono wrap-anywhere">{hook.url}</strong>, and its pending deliveries are dropped. Its delivery log goes with it.
        </p>
        <div class="button-row">
          <button type="submit" class="button danger">
            Delete webhook
          </button>
          <a class="button ghost" href="/console/webhooks">
            Keep it
          </a>
        </div>
      </form>,
    );
  });
  app.post('/webhooks/:id/delete', async (c) => {
    try {
      await call(c.get('api').DELETE('/v1/api/webhooks/{webhook_id}', { params: { path: { webhook_id: c.req.param('id')! } } }));
      return c.redirect('/console/webhooks?done=webhook_deleted', 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return webhooksPage(c, { problem: err, status: err.status });
    }
  });
}
