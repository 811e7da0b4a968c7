import { call, ClientError, type Schemas } from '../api.ts';
import type { ConsoleApp, ConsoleContext } from '../app.tsx';
import { noticeFor, Time } from '../components.tsx';
import { Field, PostForm, Submit } from '../form.tsx';
import { page } from '../layout.tsx';
import { onRefusal } from '../problem.tsx';
import { Table, type Column } from '../table.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { EVENT_TYPES } from '../../domain/eventTypes.ts';

export const webhookPath = (id: string) => `/console/webhooks/${encodeURIComponent(id)}`;

/** The tenant's webhook of this id, or the API's not_found in its words. */
export async function findWebhook(c: ConsoleContext, id: string): Promise<Schemas['Webhook']> {
  const hooks = await call(c.get('api').GET('/v1/api/webhooks'));
  const hook = hooks.data.find((w) => w.webhook_id === id);
  if (!hook) throw new ClientError('not_found', 'no such webhook', 'it may have been deleted', 404);
  return hook;
}

const COLUMNS: Column<Schemas['Webhook']>[] = [
  { label: 'URL', class: 'mono wrap-anywhere', cell: (w) => w.url },
  { label: 'Events', cell: (w) => w.events.join(', ') },
  { label: 'Created', cell: (w) => <Time at={w.created_at} /> },
  {
    label: 'Actions',
    hiddenLabel: true,
    class: 'row-actions',
    cell: (w) => (
      <div class="button-row end">
        <a class="button small" href={webhookPath(w.webhook_id)} aria-label={`Deliveries of ${w.url}`}>
          Deliveries
        </a>
        <a class="button small danger-ghost" href={`${webhookPath(w.webhook_id)}/delete`} aria-label={`Delete webhook ${w.url}`}>
          Delete…
        </a>
      </div>
    ),
  },
];

/** A new webhook's signing secret, shown this once. */
function Created({ hook }: { hook: Schemas['CreatedWebhook'] }) {
  return (
    <section class="card stack issued" aria-labelledby="created-h">
      <h2 id="created-h">Your new webhook</h2>
      <p>
        Events go to <span class="mono">{hook.url}</span>. Copy its signing secret now: <strong>this is the only time it is shown.</strong>
      </p>
      <label for="webhook-secret">Signing secret</label>
      <div class="copy-row">
        <input id="webhook-secret" class="mono" readonly value={hook.secret} data-select-on-focus="" />
        <button type="button" class="button small" data-copy="webhook-secret">
          Copy
        </button>
      </div>
      <p class="muted small">
        Each delivery carries <code>agentvm-signature: t=…,v1=…</code>: the hex HMAC-SHA256 of <code>t.body</code> with this secret.
      </p>
    </section>
  );
}

/** The webhooks list and the form that adds one (given again as it was sent when the API refused it). */
export async function webhooksPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number; created?: Schemas['CreatedWebhook']; form?: { url: string; events: string[] } } = {}) {
  const session = c.get('session') as ConsoleSession;
  const hooks = await call(c.get('api').GET('/v1/api/webhooks'));
  const checked = new Set(opts.form?.events ?? []);
  return page(
    c,
    { title: 'Webhooks', section: 'webhooks', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <>
      {opts.created ? <Created hook={opts.created} /> : null}
      <section class="card" aria-labelledby="hooks-h">
        <h2 id="hooks-h">Your webhooks</h2>
        {hooks.data.length === 0 ? <p class="empty">No webhooks.</p> : <Table id="webhook-rows" caption="Webhooks, newest first" columns={COLUMNS} rows={hooks.data} />}
      </section>
      <section class="card stack" aria-labelledby="new-hook-h">
        <h2 id="new-hook-h">Add a webhook</h2>
        <PostForm session={session} action="/console/webhooks" class="stack">
          <Field id="hook-url" label="URL">
            <input id="hook-url" name="url" type="url" required maxlength={2048} placeholder="https://example.com/agentvm-events" value={opts.form?.url ?? ''} />
            <span class="muted small">https, to a public address; each event is POSTed as JSON and retried for 24 hours until a 2xx.</span>
          </Field>
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
            <Submit label="Add webhook" variant="primary" />
          </div>
        </PostForm>
      </section>
    </>,
  );
}

export function registerWebhooks(app: ConsoleApp) {
  app.get('/webhooks', (c) => webhooksPage(c));
  app.post('/webhooks', async (c) => {
    const form = await c.req.parseBody({ all: true });
    const url = typeof form.url === 'string' ? form.url.trim() : '';
    const raw = form.events;
    const events = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).filter((e): e is string => typeof e === 'string');
    return onRefusal(
      async () => webhooksPage(c, { created: await call(c.get('api').POST('/v1/api/webhooks', { body: { url, events } })), status: 201 }),
      (problem) => webhooksPage(c, { problem, status: problem.status, form: { url, events } }),
    );
  });
}
