/**
 * The shell's WebSocket: the API server's upgrade handler for /v1/api/vms/{id}/shell/socket (a ticket
 * from openVMShell instead of a key: a browser cannot set headers on a WebSocket), and the bridge
 * between a socket and a guest's terminal (http/shellBridge.ts, which the VM host's internal endpoint uses too).
 */
import type { IncomingMessage, Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { WebSocketServer, WebSocket } from 'ws';
import { DomainError } from '../domain/errors.ts';
import type { GuestShell, ShellEnd } from '../domain/guestAccess.ts';
import type { Services } from '../domain/services.ts';
import * as vmStore from '../store/vms.ts';
import type { Logger } from '../log.ts';
import { refuseUpgrade } from '../http/errors.ts';
import { bridgeShell, SHELL_CLOSE, type ShellSockets } from '../http/shellBridge.ts';

export { SHELL_CLOSE, type ShellSockets };

export const shellSocketPath = (vmId: string) => `/v1/api/vms/${encodeURIComponent(vmId)}/shell/socket`;
const SOCKET_PATH = /^\/v1\/api\/vms\/(vm_[A-Za-z0-9]+)\/shell\/socket$/;

/** A text frame is a resize; nothing legitimate is larger. */
const MAX_MESSAGE = 1024 * 1024;

/** A close reason is at most 123 bytes. */
const reason = (text: string) => {
  let r = text;
  while (Buffer.byteLength(r) > 123) r = r.slice(0, -1);
  return r;
};

/** How a shell's end reads on the customer's socket. */
export function publicClose(end: ShellEnd): { code: number; reason: string } {
  if (end.kind === 'exit') {
    return { code: SHELL_CLOSE.exited, reason: end.signal ? `signal ${end.signal}` : `exit ${end.exit_code ?? 0}` };
  }
  if (end.error === 'vm_not_running') return { code: SHELL_CLOSE.vmStopped, reason: reason(`vm_not_running: ${end.message}`) };
  return { code: SHELL_CLOSE.internal, reason: reason(`${end.error}: ${end.message}`) };
}

/** A terminal size from a query parameter, 1–1000; `fallback` when absent. */
export function terminalSize(value: string | null, fallback: number, name: string): number {
  if (value === null || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new DomainError('invalid_request', `${name}: must be an integer from 1 to 1000`);
  return n;
}

/** How often an open shell marks its VM active (the shortest idle stop is 60 s). */
const SHELL_ACTIVITY_MS = 20_000;

/** Serves customers' shell sockets on the API server: each takes its ticket's VM's shell. */
export function serveShellSockets(server: Server, services: Services, log: Logger): ShellSockets {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE, perMessageDeflate: false });
  const open = new Set<WebSocket>();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const requestId = `req_ws_${randomBytes(8).toString('hex')}`;
    socket.on('error', () => undefined);
    const url = new URL(req.url ?? '/', 'http://agentvm.invalid');
    const m = SOCKET_PATH.exec(url.pathname);
    if (!m) return refuseUpgrade(socket, new DomainError('not_found', `no such path: ${url.pathname}`), requestId);
    const vmId = m[1];
    let size: { cols: number; rows: number };
    try {
      size = { cols: terminalSize(url.searchParams.get('cols'), 80, 'cols'), rows: terminalSize(url.searchParams.get('rows'), 24, 'rows') };
    } catch (err) {
      return refuseUpgrade(socket, err as DomainError, requestId);
    }
    services.shells.connect(vmId, url.searchParams.get('ticket') ?? '', size).then(
      (shell) => {
        if (!shell) {
          const hint = 'a shell ticket is good once, for 60 seconds: POST /v1/api/vms/{id}/shell for a new one';
          return refuseUpgrade(socket, new DomainError('unauthorized', '', hint), requestId);
        }
        let joined = false;
        socket.once('close', () => joined || shell.close());
        wss.handleUpgrade(req, socket, head, (ws) => {
          joined = true;
          open.add(ws);
          // An open shell is activity: the VM's idle stop waits while it is open (and from its close).
          const touch = () => void vmStore.touchActivity(services.db, vmId, services.clock.now()).catch(() => undefined);
          touch();
          const keepUp = setInterval(touch, SHELL_ACTIVITY_MS);
          ws.on('close', () => {
            open.delete(ws);
            clearInterval(keepUp);
            touch();
          });
          log.info({ req_id: requestId, vm_id: vmId }, 'shell opened');
          bridgeShell(ws, shell, publicClose);
        });
      },
      (err: Error) => {
        if (err instanceof DomainError) return refuseUpgrade(socket, err, requestId);
        log.error({ req_id: requestId, vm_id: vmId, err }, 'opening a shell failed');
        refuseUpgrade(socket, new DomainError('internal', ''), requestId);
      },
    );
  });
  return {
    close() {
      for (const ws of open) ws.close(SHELL_CLOSE.serverStopping, 'the server is stopping');
      wss.close();
    },
  };
}
