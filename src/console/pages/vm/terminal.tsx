import { call, ClientError, type Schemas } from '../../api.ts';
import type { ConsoleApp, ConsoleContext } from '../../app.tsx';
import { vmPath } from '../../components.tsx';
import { assetUrl } from '../../assets.ts';
import { page } from '../../layout.tsx';
import { PostForm, Submit } from '../../form.tsx';
import { newNonce, SECURITY_HEADERS } from '../../security.ts';
import type { ConsoleSession } from '../../../domain/sessions.ts';
import { onRefusal } from '../../problem.tsx';
import type { ShowVm } from './section.ts';

const terminalPath = (id: string) => `${vmPath(id)}/terminal`;

/**
 * The shell socket's path and query from openVMShell's answer. Called in process, the operation names an origin
 * that only exists in this process; the browser puts its own (ws: or wss:, the host it reached) in front.
 */
export function socketPathOf(ticket: Schemas['ShellTicket']): string {
  const url = new URL(ticket.url);
  return `${url.pathname}${url.search}`;
}

/** Asks the API's shell operation, in process and as the session's tenant, for a one-use ticket. */
async function issueTicket(c: ConsoleContext, id: string) {
  const ticket = await call(c.get('api').POST('/v1/api/vms/{id}/shell', { params: { path: { id } } }));
  return { socket: socketPathOf(ticket), expires_at: ticket.expires_at };
}

/** The VM page's Terminal section: the button that opens a shell on a page of its own. */
export function TerminalSection({ vm, session }: { vm: Schemas['VM']; session: ConsoleSession }) {
  return (
    <section class="card stack" aria-labelledby="terminal-h" id="terminal">
      <h2 id="terminal-h">Terminal</h2>
      <p class="muted small">
        A login shell in the VM as the user <code>agent</code> in <code>/persist/workspace</code>, with the environment a run of the harness
        has: the way to log a harness in by hand or look around. It opens on a page of its own.
      </p>
      <PostForm session={session} action={terminalPath(vm.vm_id)} class="button-row">
        <Submit label="Open terminal" />
        {vm.status !== 'running' ? <span class="muted small">The VM must be running to open a terminal.</span> : null}
      </PostForm>
    </section>
  );
}

/** The terminal page; `socket` is a ticket issued for this response (the first connection), if any. */
async function terminalPage(c: ConsoleContext, vm: Schemas['VM'], socket?: string) {
  const session = c.get('session');
  const nonce = newNonce();
  return page(
    c,
    {
      title: 'Terminal',
      section: 'vms',
      session,
      kind: 'terminal',
      styleNonce: nonce,
      mainClass: 'wide',
      crumbs: [
        { href: '/console/vms', label: 'VMs' },
        { href: vmPath(vm.vm_id), label: vm.vm_id },
      ],
    },
    <section class="card stack terminal-card" aria-labelledby="terminal-h">
      <div class="section-head">
        <h2 id="terminal-h">
          Shell in <span class="mono">{vm.vm_id}</span>
        </h2>
        <PostForm session={session} action={`${terminalPath(vm.vm_id)}/ticket`} class="button-row" id="terminal-controls">
          <button type="submit" class="button small primary" id="terminal-reconnect" hidden>
            Reconnect
          </button>
          <button type="button" class="button small ghost" id="terminal-disconnect" hidden>
            Disconnect
          </button>
        </PostForm>
      </div>
      <div class="terminal-bar">
        <p id="terminal-status" class="terminal-status" role="status" data-state="idle">
          <span class="status status-stopped">Not connected</span>
        </p>
        <span id="terminal-size" class="muted small mono" title="Columns × rows"></span>
      </div>
      <noscript>
        <p class="problem">
          The terminal needs JavaScript. Without it, <code>agentvm vms shell {vm.vm_id}</code> opens the same shell from your own terminal.
        </p>
      </noscript>
      <div
        id="terminal-screen"
        class="terminal-screen"
        role="region"
        aria-label={`Terminal of ${vm.vm_id}`}
        nonce={nonce}
        data-xterm={assetUrl('xterm.mjs')}
        data-fit={assetUrl('addon-fit.mjs')}
        data-socket={socket}
      ></div>
      <div class="terminal-foot">
        <p id="terminal-help" class="muted small">
          Every key goes to the shell, Tab included. To leave the terminal with the keyboard, press <kbd>Esc</kbd> then <kbd>Tab</kbd>. The
          shell ends when you type <code>exit</code> or the VM stops; closing this page ends it too.
        </p>
        <label class="check small">
          <input type="checkbox" id="terminal-screen-reader" /> Screen reader mode
        </label>
      </div>
    </section>,
  );
}

export function registerTerminal(app: ConsoleApp, showVm: ShowVm) {
  /** The page without a ticket (a reload, a bookmark): its script asks for one. */
  app.get('/vms/:id/terminal', async (c) => {
    const vm = await call(c.get('api').GET('/v1/api/vms/{id}', { params: { path: { id: c.req.param('id') } } }));
    return terminalPage(c, vm);
  });

  /** "Open terminal" on the VM page: a ticket first, so that a refusal shows on the VM page in the API's words. */
  app.post('/vms/:id/terminal', async (c) => {
    const id = c.req.param('id');
    return onRefusal(
      async () => {
        const vm = await call(c.get('api').GET('/v1/api/vms/{id}', { params: { path: { id } } }));
        const { socket } = await issueTicket(c, id);
        return terminalPage(c, vm, socket);
      },
      (problem) => showVm(c, id, { problem, status: problem.status }),
    );
  });

  /** A fresh ticket for the page's script (reload, reconnect): JSON, the API's error body on refusal. */
  app.post('/vms/:id/terminal/ticket', async (c) => {
    const headers = { ...SECURITY_HEADERS, 'Cache-Control': 'no-store' };
    try {
      return c.json(await issueTicket(c, c.req.param('id')), 201, headers);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      const body: { error: string; message: string; hint?: string } = { error: err.code, message: err.message };
      if (err.hint) body.hint = err.hint;
      return c.json(body, (err.status ?? 500) as 400, headers);
    }
  });
}
