import { call, ClientError, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp, type ConsoleDeps } from '../app.tsx';
import { noticeFor, Time } from '../components.tsx';
import { Csrf, page } from '../layout.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';

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
          <div class="table-wrap">
            <table class="table responsive">
              <caption class="visually-hidden">Active API keys</caption>
              <thead>
                <tr>
                  <th scope="col">Label</th>
                  <th scope="col">Key</th>
                  <th scope="col">Scope</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.data.map((k) => (
                  <tr>
                    <td data-label="Label">{k.label || <span class="muted">(no label)</span>}</td>
                    <td data-label="Key" class="mono">
                      {k.prefix}…
                    </td>
                    <td data-label="Scope">{k.scope}</td>
                    <td data-label="Created">
                      <Time at={k.created_at} />
                    </td>
                    <td data-label="Last used">
                      <Time at={k.last_used_at} />
                    </td>
                    <td data-label="Actions" class="row-actions">
                      <form method="post" action={`/console/keys/${encodeURIComponent(k.key_id)}/revoke`} class="inline">
                        <Csrf session={session} />
                        <button type="submit" class="button small danger-ghost" aria-label={`Revoke key ${k.label || k.prefix}`}>
                          Revoke
                        </button>
                      </form>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <section class="card stack" aria-labelledby="issue-h">
        <h2 id="issue-h">Issue a key</h2>
        <form class="grid-secret" method="post" action="/console/keys">
          <Csrf session={session} />
          <div class="field">
            <label for="key-label">Label</label>
            <input id="key-label" name="label" maxlength={100} placeholder="ci, laptop, agent-runner" />
          </div>
          <div class="field">
            <label for="key-scope">Scope</label>
            <select id="key-scope" name="scope">
              <option value="read">Read only</option>
              <option value="readwrite">Read and write (can spend money)</option>
            </select>
          </div>
          <div class="field end">
            <button type="submit" class="button primary">
              Issue key
            </button>
          </div>
        </form>
      </section>
    </>,
  );
}

export function registerKeys(app: ConsoleApp, _deps: ConsoleDeps) {
  app.get('/keys', (c) => keysPage(c));
  app.post('/keys', async (c) => {
    try {
      const issued = await call(
        c.get('api').POST('/v1/api/keys', { body: { label: await field(c, 'label'), scope: (await field(c, 'scope')) as 'read' } }),
      );
      return keysPage(c, { issued, status: 201 });
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return keysPage(c, { problem: err, status: err.status });
    }
  });
  app.post('/keys/:id/revoke', async (c) => {
    try {
      await call(c.get('api').DELETE('/v1/api/keys/{key_id}', { params: { path: { key_id: c.req.param('id') } } }));
      return c.redirect('/console/keys?done=revoked', 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return keysPage(c, { problem: err, status: err.status });
    }
  });
}
