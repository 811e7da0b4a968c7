import type { Context } from 'hono';
import { defineOperation } from '../operation.ts';
import { IdParam, ShellTicket } from '../schemas.ts';
import { SHELL_CLOSE, shellSocketPath } from '../shellSocket.ts';

/** Where the client reached us, as a WebSocket origin: behind a TLS proxy, its X-Forwarded-Proto and -Host say. */
function socketOrigin(c: Context): string {
  const url = new URL(c.req.url);
  const proto = c.req.header('x-forwarded-proto')?.split(',')[0].trim().toLowerCase() ?? url.protocol.replace(':', '');
  const host = c.req.header('x-forwarded-host')?.split(',')[0].trim() || url.host;
  return `${proto === 'https' ? 'wss' : 'ws'}://${host}`;
}

export const openVMShell = defineOperation({
  operationId: 'openVMShell',
  method: 'post',
  path: '/v1/api/vms/{id}/shell',
  summary: 'Open a terminal in a running VM: a WebSocket URL with a one-use ticket (extension)',
  description:
    'A login shell as the user `agent` in `/persist/workspace`, with `TERM=xterm-256color`, the egress proxy and the ' +
    "brokered placeholders a run of the VM's harness has: this is how a harness with a one-time login (`opencode auth login`) " +
    'is logged in. Connect to `url` within 60 seconds, once (a used or expired ticket is refused with 401). On the socket, ' +
    'binary frames are terminal bytes both ways; a text frame `{"type": "resize", "cols": C, "rows": R}` sets the size. ' +
    `The socket closes with code ${SHELL_CLOSE.exited} when the shell exits (the reason says its status), ${SHELL_CLOSE.vmStopped} when the VM ` +
    `stops under it, ${SHELL_CLOSE.serverStopping} when the server stops; closing it ends every process of the shell's session. Several shells may be open at once.`,
  tag: 'VMs',
  audience: 'customer',
  mcp: { tool: 'vm_shell_open' },
  extension: true,
  params: IdParam,
  success: { status: 201, schema: ShellTicket, description: 'The socket to connect to, and until when' },
  errors: ['not_found', 'vm_not_running', 'quota_exceeded', 'unavailable'],
  extensions: {
    'x-agentvm-websocket': {
      path: '/v1/api/vms/{id}/shell/socket',
      query: { ticket: 'the one-use ticket (in `url` already)', cols: 'terminal columns, 1–1000 (optional)', rows: 'terminal rows, 1–1000 (optional)' },
      client_frames: { binary: 'keystrokes: bytes for the terminal', text: '{"type": "resize", "cols": 1–1000, "rows": 1–1000}' },
      server_frames: { binary: 'terminal output' },
      close_codes: {
        [SHELL_CLOSE.exited]: 'the shell exited; the reason is `exit N` or `signal NAME`',
        [SHELL_CLOSE.vmStopped]: 'vm_not_running: the VM stopped (or its host went away); the reason says which',
        [SHELL_CLOSE.serverStopping]: 'the server is stopping',
        [SHELL_CLOSE.internal]: 'the shell could not go on; the reason says why',
      },
      refusals: { 401: 'unknown, used or expired ticket', 409: 'vm_not_running: the VM is not running any more' },
    },
  },
  handler: async ({ c, services, principal, params }) => {
    const { ticket, expiresAt } = await services.shells.issueTicket(principal.tenantId, params.id);
    const url = `${socketOrigin(c)}${shellSocketPath(params.id)}?ticket=${encodeURIComponent(ticket)}`;
    return { body: { url, expires_at: expiresAt.toISOString() }, status: 201 };
  },
});
