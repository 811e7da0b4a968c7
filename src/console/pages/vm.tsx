import type { Child } from 'hono/jsx';
import { call, ClientError, type ApiClient, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp, type ConsoleDeps } from '../app.tsx';
import { ActionButton, noticeFor, Pager, pricingOf, RunStatus, Status, Time, vmPath } from '../components.tsx';
import { bytes, duration, TRANSITIONAL } from '../format.ts';
import { Csrf, fragment, page } from '../layout.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { actionsFor } from '../../domain/vmState.ts';
import { FilesSection, registerFiles } from './files.tsx';
import { registerTerminal, TerminalSection } from './terminal.tsx';
import { PortsSection, registerPorts } from './ports.tsx';

const RUNS_PAGE = 10;
const EGRESS_LOG_ROWS = 20;
const LIFECYCLE = ['stop', 'start', 'restart', 'reprovision', 'suspend'] as const;


/** The VM's facts and lifecycle buttons; polls itself while the status is changing. */
function Facts({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  const poll = TRANSITIONAL.has(vm.status) ? 'every 2s' : 'every 15s';
  return (
    <section id="facts" class="card" aria-labelledby="facts-h" hx-get={`${vmPath(vm.vm_id)}/facts`} hx-trigger={poll} hx-swap="outerHTML">
      <div class="section-head">
        <h2 id="facts-h">Overview</h2>
        <div class="button-row">
          {actionsFor(vm.status).map((a) => (
            <ActionButton session={session} action={`${vmPath(vm.vm_id)}/${a}`} label={a[0].toUpperCase() + a.slice(1)} />
          ))}
          <a class="button small danger-ghost" href={`${vmPath(vm.vm_id)}/destroy`}>
            Destroy…
          </a>
        </div>
      </div>
      <dl class="facts grid-facts">
        <dt>Status</dt>
        <dd>
          <Status status={vm.status} reason={vm.status_reason} />
        </dd>
        <dt>Harness</dt>
        <dd>{vm.harness_display}</dd>
        <dt>Pricing</dt>
        <dd>{pricingOf(vm)}</dd>
        <dt>Size</dt>
        <dd>
          {vm.vcpus} vCPU · {vm.memory_mib / 1024} GiB memory · {vm.disk_gib} GiB persist disk
        </dd>
        <dt>IPv4</dt>
        <dd class="mono">{vm.ipv4 ?? '—'}</dd>
        <dt>Template</dt>
        <dd class="mono">{vm.template_id ?? '—'}</dd>
        <dt>Created</dt>
        <dd>
          <Time at={vm.created_at} />
        </dd>
        <dt>Updated</dt>
        <dd>
          <Time at={vm.updated_at} />
        </dd>
      </dl>
    </section>
  );
}

function TaskBox({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  return (
    <section class="card stack" aria-labelledby="task-h">
      <h2 id="task-h">Run a task</h2>
      <form class="stack" method="post" action={`${vmPath(vm.vm_id)}/runs`}>
        <Csrf session={session} />
        <label for="task">Task for {vm.harness_display}</label>
        <textarea id="task" name="task" rows={3} required maxlength={65536} placeholder="Describe what the agent should do"></textarea>
        <div class="button-row">
          <button type="submit" class="button primary">
            Run
          </button>
          {vm.status !== 'running' ? <span class="muted small">The VM must be running to take a task.</span> : null}
        </div>
      </form>
    </section>
  );
}

function RunHistory({ vm, runs, offset }: { vm: Schemas['VM']; runs: Schemas['RunList']; offset: number }) {
  return (
    <section class="card" aria-labelledby="runs-h">
      <h2 id="runs-h">Runs</h2>
      {runs.total === 0 ? (
        <p class="empty">No runs yet.</p>
      ) : (
        <>
          <div class="table-wrap">
            <table class="table responsive">
              <caption class="visually-hidden">Runs of this VM, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Task</th>
                  <th scope="col">Status</th>
                  <th scope="col">Exit</th>
                  <th scope="col">Took</th>
                  <th scope="col">Started</th>
                </tr>
              </thead>
              <tbody>
                {runs.data.map((r) => (
                  <tr>
                    <td data-label="Task" class="task-cell">
                      <a href={`${vmPath(vm.vm_id)}/runs/${r.run_id}`}>{r.task.length > 80 ? `${r.task.slice(0, 80)}…` : r.task}</a>
                    </td>
                    <td data-label="Status">
                      <RunStatus run={r} />
                    </td>
                    <td data-label="Exit">{r.exit_code ?? '—'}</td>
                    <td data-label="Took">{duration(r.duration_ms)}</td>
                    <td data-label="Started">
                      <Time at={r.started_at ?? r.created_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <Pager base={vmPath(vm.vm_id)} param="runs" offset={offset} size={RUNS_PAGE} total={runs.total} label="Runs pages" />
        </>
      )}
    </section>
  );
}

function Egress({ vm, log, session }: { vm: Schemas['VM']; log: Schemas['EgressLog']; session: ConsoleSession }) {
  return (
    <section class="card stack" aria-labelledby="egress-h">
      <h2 id="egress-h">Network egress</h2>
      <form class="stack" method="post" action={`${vmPath(vm.vm_id)}/egress`}>
        <Csrf session={session} />
        <div class="field">
          <label for="egress-mode">What the VM may reach</label>
          <select id="egress-mode" name="mode">
            <option value="none" selected={vm.egress.mode === 'none'}>
              Nothing
            </option>
            <option value="allowlist" selected={vm.egress.mode === 'allowlist'}>
              Only the hosts listed below
            </option>
            <option value="public" selected={vm.egress.mode === 'public'}>
              Any public address
            </option>
          </select>
        </div>
        <div class="field">
          <label for="egress-allow">Allowed hosts, one a line</label>
          <textarea id="egress-allow" name="allow" rows={3} aria-describedby="egress-allow-help">
            {vm.egress.allow.join('\n')}
          </textarea>
          <p id="egress-allow-help" class="muted small">
            Hostnames such as api.example.com, or *.example.org for any subdomain. Used only in the allow-list mode.
          </p>
        </div>
        <div>
          <button type="submit" class="button">
            Save policy
          </button>
        </div>
      </form>
      <h3>Recent connections</h3>
      {log.data.length === 0 ? (
        <p class="empty">No connections recorded in the last 7 days.</p>
      ) : (
        <div class="table-wrap">
          <table class="table responsive">
            <caption class="visually-hidden">Egress log, newest first</caption>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Host</th>
                <th scope="col">Decision</th>
                <th scope="col">Out / in</th>
              </tr>
            </thead>
            <tbody>
              {log.data.map((e) => (
                <tr>
                  <td data-label="When">
                    <Time at={e.at} />
                  </td>
                  <td data-label="Host" class="mono">
                    {e.host}:{e.port}
                  </td>
                  <td data-label="Decision">
                    <span class={`status status-${e.decision}`}>{e.decision}</span> <span class="muted small">{e.reason}</span>
                  </td>
                  <td data-label="Out / in">
                    {bytes(e.bytes_out)} / {bytes(e.bytes_in)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function Secrets({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  return (
    <section class="card stack half" aria-labelledby="secrets-h">
      <h2 id="secrets-h">Secrets</h2>
      <p class="muted small">Environment variables for the agent, such as a provider's API key. Values are write-only: nobody can read them back here.</p>
      {vm.secret_names.length === 0 ? (
        <p class="empty">No secrets set.</p>
      ) : (
        <ul class="secret-list">
          {vm.secret_names.map((name) => (
            <li>
              <code>{name}</code>
              {vm.brokered_secret_names.includes(name) ? <span class="badge" title="Kept by the platform; never enters the VM">brokered</span> : null}
              <form method="post" action={`${vmPath(vm.vm_id)}/secrets/remove`} class="inline">
                <Csrf session={session} />
                <input type="hidden" name="name" value={name} />
                <button type="submit" class="button small ghost" aria-label={`Remove secret ${name}`}>
                  Remove
                </button>
              </form>
            </li>
          ))}
        </ul>
      )}
      <form class="stack" method="post" action={`${vmPath(vm.vm_id)}/secrets`}>
        <Csrf session={session} />
        <div class="field">
          <label for="secret-name">Name</label>
          <input id="secret-name" name="name" required pattern="[A-Za-z_][A-Za-z0-9_]*" placeholder="ANTHROPIC_API_KEY" autocomplete="off" spellcheck={false} />
        </div>
        <div class="field">
          <label for="secret-value">Value</label>
          <input id="secret-value" name="value" type="password" required autocomplete="new-password" />
        </div>
        <div>
          <button type="submit" class="button">
            Set secret
          </button>
        </div>
      </form>
    </section>
  );
}

function Capture({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  return (
    <section class="card stack half" aria-labelledby="capture-h">
      <h2 id="capture-h">Capture as a template</h2>
      <p class="muted small">Snapshots the persist disk only. A public capture has secrets scrubbed from the copy.</p>
      <form class="stack" method="post" action={`${vmPath(vm.vm_id)}/capture`}>
        <Csrf session={session} />
        <div class="field">
          <label for="capture-name">Template name</label>
          <input id="capture-name" name="name" maxlength={100} required />
        </div>
        <div class="field">
          <label for="capture-visibility">Visibility</label>
          <select id="capture-visibility" name="visibility">
            <option value="private">Private (only you)</option>
            <option value="public">Public (in the gallery)</option>
          </select>
        </div>
        <div>
          <button type="submit" class="button">
            Capture
          </button>
        </div>
      </form>
    </section>
  );
}

/** Idle stop and expiry: what they are, and a form to change them (PATCH /v1/api/vms/{id}). */
function Lifetime({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  return (
    <section class="card stack half" aria-labelledby="lifetime-h">
      <h2 id="lifetime-h">Idle stop and expiry</h2>
      <dl class="facts" id="lifetime">
        <dt>Idle stop</dt>
        <dd>{vm.auto_stop_after_s === null ? 'never' : `after ${duration(vm.auto_stop_after_s * 1000)} without a run, a shell or egress`}</dd>
        <dt>Expires</dt>
        <dd>{vm.expires_at ? <Time at={vm.expires_at} /> : 'never'}</dd>
      </dl>
      <form class="stack" method="post" action={`${vmPath(vm.vm_id)}/lifetime`}>
        <Csrf session={session} />
        <div class="field">
          <label for="auto-stop">Stop when idle for (minutes; empty: never)</label>
          <input id="auto-stop" name="auto_stop_min" inputmode="numeric" pattern="[0-9]*" value={vm.auto_stop_after_s === null ? '' : String(Math.round(vm.auto_stop_after_s / 60))} />
        </div>
        <div class="field">
          <label for="expires-at">Destroy at (RFC 3339, e.g. 2026-12-31T18:00:00Z; empty: never)</label>
          <input id="expires-at" name="expires_at" class="mono" autocomplete="off" spellcheck={false} value={vm.expires_at ?? ''} />
        </div>
        <div class="button-row">
          <button type="submit" class="button">
            Save
          </button>
        </div>
      </form>
    </section>
  );
}

/** The sections of a VM's page, in order: a part of the page is a section added here. */
type VmSection = (ctx: { vm: Schemas['VM']; session: ConsoleSession; api: ApiClient; c: ConsoleContext }) => Promise<Child>;
const VM_SECTIONS: VmSection[] = [
  async ({ vm, session }) => <TaskBox vm={vm} session={session} />,
  async ({ vm, session }) => <TerminalSection vm={vm} session={session} />,
  async (ctx) => FilesSection(ctx),
  async (ctx) => PortsSection(ctx),
  async ({ vm, api, c }) => {
    const offset = Math.max(0, Number.parseInt(c.req.query('runs') ?? '0', 10) || 0);
    const runs = await call(api.GET('/v1/api/vms/{id}/runs', { params: { path: { id: vm.vm_id }, query: { limit: RUNS_PAGE, offset } } }));
    return <RunHistory vm={vm} runs={runs} offset={offset} />;
  },
  async ({ vm, session, api }) => {
    const log = await call(api.GET('/v1/api/vms/{id}/egress/log', { params: { path: { id: vm.vm_id }, query: { limit: EGRESS_LOG_ROWS } } }));
    return <Egress vm={vm} log={log} session={session} />;
  },
  async ({ vm, session }) => <Secrets vm={vm} session={session} />,
  async ({ vm, session }) => <Capture vm={vm} session={session} />,
  async ({ vm, session }) => <Lifetime vm={vm} session={session} />,
];

export async function vmPage(c: ConsoleContext, id: string, opts: { problem?: ClientError; status?: number } = {}) {
  const api = c.get('api') as ApiClient;
  const session = c.get('session') as ConsoleSession;
  const vm = await call(api.GET('/v1/api/vms/{id}', { params: { path: { id } } }));
  const sections = await Promise.all(VM_SECTIONS.map((s) => s({ vm, session, api, c })));
  return page(
    c,
    {
      title: vm.vm_id,
      section: 'vms',
      session,
      crumbs: [{ href: '/console/vms', label: 'VMs' }],
      problem: opts.problem,
      status: opts.status,
      notice: noticeFor(c.req.query('done')),
    },
    <div class="vm-page">
      <Facts vm={vm} session={session} />
      {sections}
    </div>,
  );
}

export function registerVm(app: ConsoleApp, deps: ConsoleDeps) {
  registerFiles(app, deps);
  registerTerminal(app);
  registerPorts(app);
  /** Runs a change; on the API's refusal, shows the VM's page with its message and hint. */
  const act = async (c: ConsoleContext, change: () => Promise<string>) => {
    try {
      return c.redirect(await change(), 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return vmPage(c, c.req.param('id')!, { problem: err, status: err.status });
    }
  };

  app.get('/vms/:id', (c) => vmPage(c, c.req.param('id')));
  app.get('/vms/:id/facts', async (c) => {
    const vm = await call(c.get('api').GET('/v1/api/vms/{id}', { params: { path: { id: c.req.param('id') } } }));
    return fragment(c, <Facts vm={vm} session={c.get('session')} />);
  });

  for (const action of LIFECYCLE) {
    app.post(`/vms/:id/${action}`, async (c) => {
      const id = c.req.param('id')!;
      const back = (await field(c, 'back')) === 'list' ? `/console/vms?done=${action}` : `${vmPath(id)}?done=${action}`;
      return act(c, async () => {
        await call(c.get('api').POST(`/v1/api/vms/{id}/${action}`, { params: { path: { id } } }));
        return back;
      });
    });
  }

  app.get('/vms/:id/destroy', async (c) => {
    const vm = await call(c.get('api').GET('/v1/api/vms/{id}', { params: { path: { id: c.req.param('id') } } }));
    const session = c.get('session');
    return page(
      c,
      { title: 'Destroy this VM?', section: 'vms', session, crumbs: [{ href: '/console/vms', label: 'VMs' }, { href: vmPath(vm.vm_id), label: vm.vm_id }] },
      <form class="card narrow stack danger-zone" method="post" action={`${vmPath(vm.vm_id)}/destroy`}>
        <Csrf session={session} />
        <p>
          Destroying <strong class="mono">{vm.vm_id}</strong> stops it, stops its billing and <strong>removes its disks, the persist disk included</strong>. This cannot be undone.
        </p>
        <label for="confirm-id">Type the VM's id to confirm</label>
        <input id="confirm-id" name="confirm" required autocomplete="off" spellcheck={false} />
        <div class="button-row">
          <button type="submit" class="button danger">
            Destroy VM
          </button>
          <a class="button ghost" href={vmPath(vm.vm_id)}>
            Keep it
          </a>
        </div>
      </form>,
    );
  });
  app.post('/vms/:id/destroy', async (c) => {
    const id = c.req.param('id')!;
    if ((await field(c, 'confirm')) !== id) {
      return vmPage(c, id, { problem: new ClientError('invalid_request', 'confirm: the id typed does not match this VM', 'nothing was destroyed; type the id exactly', 400), status: 400 });
    }
    return act(c, async () => {
      await call(c.get('api').DELETE('/v1/api/vms/{id}', { params: { path: { id } } }));
      return '/console/vms?done=destroyed';
    });
  });

  app.post('/vms/:id/runs', async (c) => {
    const id = c.req.param('id')!;
    const task = (await c.req.parseBody()).task;
    return act(c, async () => {
      const run = await call(
        c.get('api').POST('/v1/api/vms/{id}/run', {
          params: { path: { id } },
          body: { task: typeof task === 'string' ? task : '' },
          headers: { Prefer: 'respond-async' },
        }),
      );
      return `${vmPath(id)}/runs/${run.run_id}`;
    });
  });

  app.post('/vms/:id/egress', async (c) => {
    const id = c.req.param('id')!;
    const mode = await field(c, 'mode');
    const allow = (await field(c, 'allow')).split(/[\s,]+/).filter(Boolean);
    return act(c, async () => {
      await call(c.get('api').PUT('/v1/api/vms/{id}/egress', { params: { path: { id } }, body: { mode: mode as 'none', allow } }));
      return `${vmPath(id)}?done=egress#egress-h`;
    });
  });

  const setSecret = (c: ConsoleContext, id: string, name: string, value: string | null, done: string) =>
    act(c, async () => {
      if (!name) throw new ClientError('invalid_request', 'name: a secret needs a name', undefined, 400);
      await call(c.get('api').PUT('/v1/api/vms/{id}/secrets', { params: { path: { id } }, body: { [name]: value } }));
      return `${vmPath(id)}?done=${done}#secrets-h`;
    });
  app.post('/vms/:id/secrets', async (c) => {
    const form = await c.req.parseBody();
    const value = typeof form.value === 'string' ? form.value : '';
    return setSecret(c, c.req.param('id')!, await field(c, 'name'), value, 'secret_set');
  });
  app.post('/vms/:id/secrets/remove', async (c) => setSecret(c, c.req.param('id')!, await field(c, 'name'), null, 'secret_removed'));

  app.post('/vms/:id/lifetime', async (c) => {
    const id = c.req.param('id')!;
    const minutes = await field(c, 'auto_stop_min');
    const expires = await field(c, 'expires_at');
    return act(c, async () => {
      if (minutes && !/^\d{1,6}$/.test(minutes)) throw new ClientError('invalid_request', 'auto_stop_after_s: minutes as a whole number', 'leave it empty for never', 400);
      await call(
        c.get('api').PATCH('/v1/api/vms/{id}', {
          params: { path: { id } },
          body: { auto_stop_after_s: minutes ? Number(minutes) * 60 : null, expires_at: expires || null },
        }),
      );
      return `${vmPath(id)}?done=lifetime#lifetime-h`;
    });
  });

  app.post('/vms/:id/capture', async (c) => {
    const id = c.req.param('id')!;
    const name = await field(c, 'name');
    const visibility = (await field(c, 'visibility')) as 'public';
    return act(c, async () => {
      await call(c.get('api').POST('/v1/api/vms/{id}/capture', { params: { path: { id } }, body: { name, visibility } }));
      return '/console/templates?sort=new&done=capturing';
    });
  });

}
