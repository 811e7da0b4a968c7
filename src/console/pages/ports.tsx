/**
 * The VM page's Ports section (decisions section 16): what listens in the VM, each with its preview
 * link, public or private, and whether a request wakes the VM from suspended (auto_resume). "Open"
 * makes a new preview token (the VM's earlier one stops working) and sends the browser to the port's
 * URL with it, where the server trades it for a cookie of that one host; a public port's link needs none.
 */
import { call, ClientError, type ApiClient, type Schemas } from '../api.ts';
import { field, type ConsoleApp, type ConsoleContext } from '../app.tsx';
import { vmPath } from '../components.tsx';
import { Csrf } from '../layout.tsx';
import { Table, type Column } from '../table.tsx';
import { SECURITY_HEADERS } from '../security.ts';
import type { ConsoleSession } from '../../domain/sessions.ts';
import { vmPage } from './vm.tsx';

const portPath = (vmId: string, port: number | string) => `${vmPath(vmId)}/ports/${encodeURIComponent(String(port))}`;
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

const columns = (vmId: string, session: ConsoleSession): Column<Schemas['VMPort']>[] => [
  { label: 'Port', class: 'mono', cell: (p) => p.port },
  { label: 'Process', cell: (p) => p.process ?? '—' },
  {
    label: 'Link',
    cell: (p) =>
      p.public ? (
        <a href={p.url} target="_blank" rel="noopener" class="mono">
          {p.url}
        </a>
      ) : (
        <form method="post" action={`${portPath(vmId, p.port)}/open`} target="_blank" class="button-row">
          <Csrf session={session} />
          <span class="mono">{p.url}</span>
          <button type="submit" class="button small">
            Open
          </button>
        </form>
      ),
  },
  {
    label: 'Access',
    cell: (p) => (
      <form method="post" action={`${portPath(vmId, p.port)}/public`} class="button-row">
        <Csrf session={session} />
        <input type="hidden" name="public" value={p.public ? 'false' : 'true'} />
        <span>{p.public ? 'public' : 'private'}</span>
        <button type="submit" class="button small ghost">
          {p.public ? 'Make private' : 'Make public'}
        </button>
      </form>
    ),
  },
];

export async function PortsSection({ vm, session, api }: { vm: Schemas['VM']; session: ConsoleSession; api: ApiClient }) {
  let ports: Schemas['VMPort'][] | null = null;
  let problem: ClientError | null = null;
  if (vm.status === 'running') {
    try {
      ports = (await call(api.GET('/v1/api/vms/{id}/ports', { params: { path: { id: vm.vm_id } } }))).data;
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      problem = err;
    }
  }
  return (
    <section class="card stack" aria-labelledby="ports-h" id="ports">
      <h2 id="ports-h">Ports</h2>
      <p class="muted small">
        A server started in the VM (<code>npm run dev</code>, a notebook, an API) is reachable at its preview link. Links are private: Open
        makes a new preview token and opens the link with it (links opened with the earlier token stop working); a public port opens for
        anyone with its link.
      </p>
      {vm.status !== 'running' ? (
        <p class="empty">The VM must be running to list its ports.</p>
      ) : problem ? (
        <p class="empty">
          {problem.code}: {problem.message}
        </p>
      ) : ports!.length === 0 ? (
        <p class="empty">Nothing listens yet on a port from 1024 to 65535 (or 80, 443).</p>
      ) : (
        <Table caption="Ports listening in this VM" columns={columns(vm.vm_id, session)} rows={ports!} />
      )}
      <form method="post" action={`${vmPath(vm.vm_id)}/auto-resume`} class="button-row">
        <Csrf session={session} />
        <input type="hidden" name="auto_resume" value={vm.auto_resume ? 'false' : 'true'} />
        <span class="small">{vm.auto_resume ? 'A request to a link wakes the VM when it is suspended.' : 'A link answers 409 while the VM is suspended.'}</span>
        <button type="submit" class="button small ghost">
          {vm.auto_resume ? 'Do not wake on a request' : 'Wake on a request'}
        </button>
      </form>
    </section>
  );
}

export function registerPorts(app: ConsoleApp) {
  /** On the API's refusal, the VM's page with its message and hint. */
  const act = async (c: ConsoleContext, change: () => Promise<Response>) => {
    try {
      return await change();
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return vmPage(c, c.req.param('id')!, { problem: err, status: err.status });
    }
  };

  /**
   * Open: a new token, then a page that sends the browser on to the link with it (a redirect to another
   * origin would break the console's form-action policy; a refresh is a navigation of its own).
   */
  app.post('/vms/:id/ports/:port/open', (c) =>
    act(c, async () => {
      const id = c.req.param('id');
      const port = Number(c.req.param('port'));
      const ports = (await call(c.get('api').GET('/v1/api/vms/{id}/ports', { params: { path: { id } } }))).data;
      const found = ports.find((p) => p.port === port);
      if (!found) throw new ClientError('port_closed', `nothing listens on port ${c.req.param('port')} in ${id}`, 'start the server in the VM first', 502);
      const { token } = await call(c.get('api').POST('/v1/api/vms/{id}/preview-token', { params: { path: { id } } }));
      const link = escapeHtml(`${found.url}?agentvm_token=${encodeURIComponent(token)}`);
      const html = `<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=${link}"><title>Opening port ${port}</title></head><body><p><a href="${link}">Open port ${port}</a></p></body></html>`;
      return c.html(html, 200, { ...SECURITY_HEADERS, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
    }),
  );

  app.post('/vms/:id/ports/:port/public', async (c) => {
    const on = (await field(c, 'public')) === 'true';
    return act(c, async () => {
      const id = c.req.param('id');
      await call(c.get('api').PUT('/v1/api/vms/{id}/ports/{port}', { params: { path: { id, port: c.req.param('port') } }, body: { public: on } }));
      return c.redirect(`${vmPath(id)}#ports-h`, 303);
    });
  });

  app.post('/vms/:id/auto-resume', async (c) => {
    const on = (await field(c, 'auto_resume')) === 'true';
    return act(c, async () => {
      const id = c.req.param('id');
      await call(c.get('api').PATCH('/v1/api/vms/{id}', { params: { path: { id } }, body: { auto_resume: on } }));
      return c.redirect(`${vmPath(id)}#ports-h`, 303);
    });
  });
}
