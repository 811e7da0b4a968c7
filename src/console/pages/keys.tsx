import { call, ClientError, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp, type ConsoleDeps } from '../app.tsx';
import { noticeFor, Time } from '../components.tsx';
import { Field, PostForm, Select, Submit } from '../form.tsx';
import { page } from '../layout.tsx';
import { onRefusal } from '../problem.tsx';
import { Table, type Column } from '../table.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';

const columns = (session: ConsoleSession): Column<Schemas['APIKey']>[] => [
  { label: 'Label', cell: (k) => k.label || <span class="muted">(no label)</span> },
  { label: 'Key', class: 'mono', cell: (k) => `${k.prefix}…` },
  { label: 'Scope', cell: (k) => k.scope },
  { label: 'Created', cell: (k) => <Time at={k.created_at} /> },
  { label: 'Last used', cell: (k) => <Time at={k.last_used_at} /> },
  {
    label: 'Actions',
    hiddenLabel: true,
    class: 'row-actions',
    cell: (k) => (
      <PostForm session={session} action={`/console/keys/${encodeURIComponent(k.key_id)}/revoke`} class="inline">
        <Submit label="Revoke" small variant="danger-ghost" ariaLabel={`Revoke key ${k.label || k.prefix}`} />
      </PostForm>
    ),
  },
];

async function keysPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number; issued?: Schemas['IssuedKey'] } = {}) {
  const session = c.get('session') as ConsoleSession;
  const keys = await call(c.get('api').GET('/v1/api/keys'));
  return page(
    c,
    { title: 'API keys', section: 'keys', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <>
      {opts.issued ? (
        <section class="card stack issued" aria-labelledby="issued-h">
          <h2 id="issued-h">Your new key “{opts.issued.label}”</h2>
          <p>
            Copy it now: <strong>this is the only time it is shown.</strong>
          </p>
          <label for="issued-key">Key ({opts.issued.scope})</label>
          <div class="copy-row">
            <input id="issued-key" class="mono" readonly value={opts.issued.key} data-select-on-focus="" />
            <button type="button" class="button small" data-copy="issued-key">
              Copy
            </button>
          </div>
          <p class="muted small">
            Use it as <code>AGENTVM_API_KEY</code> for the CLI, or as <code>Authorization: Bearer …</code> for the API.
          </p>
        </section>
      ) : null}
      <section class="card" aria-labelledby="keys-h">
        <h2 id="keys-h">Active keys</h2>
        {keys.data.length === 0 ? (
          <p class="empty">No active keys.</p>
        ) : (
          <Table caption="Active API keys" columns={columns(session)} rows={keys.data} />
        )}
      </section>
      <section class="card stack" aria-labelledby="issue-h">
        <h2 id="issue-h">Issue a key</h2>
        <PostForm session={session} action="/console/keys" class="grid-secret">
          <Field id="key-label" label="Label">
            <input id="key-label" name="label" maxlength={100} placeholder="ci, laptop, agent-runner" />
          </Field>
          <Field id="key-scope" label="Scope">
            <Select
              id="key-scope"
              name="scope"
              options={[
                ['read', 'Read only'],
                ['readwrite', 'Read and write (can spend money)'],
              ]}
            />
          </Field>
          <div class="field end">
            <Submit label="Issue key" variant="primary" />
          </div>
        </PostForm>
      </section>
    </>,
  );
}

export function registerKeys(app: ConsoleApp, _deps: ConsoleDeps) {
  app.get('/keys', (c) => keysPage(c));
  const again = (c: ConsoleContext) => (problem: ClientError) => keysPage(c, { problem, status: problem.status });
  app.post('/keys', async (c) => {
    const body = { label: await field(c, 'label'), scope: (await field(c, 'scope')) as 'read' };
    return onRefusal(async () => keysPage(c, { issued: await call(c.get('api').POST('/v1/api/keys', { body })), status: 201 }), again(c));
  });
  app.post('/keys/:id/revoke', (c) =>
    onRefusal(async () => {
      await call(c.get('api').DELETE('/v1/api/keys/{key_id}', { params: { path: { key_id: c.req.param('id') } } }));
      return c.redirect('/console/keys?done=revoked', 303);
    }, again(c)),
  );
}
