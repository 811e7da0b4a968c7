/**
 * A VM host's shell sockets for the API replicas (INTERNAL_SHELL_PATH): the shared token in the
 * Authorization header, the terminal's spec in SHELL_SPEC_HEADER; the shell's end goes back in the
 * close, as JSON, for the replica to word for its customer.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ApiError } from '../domain/errors.ts';
import type { GuestAccess, ShellEnd } from '../domain/guestAccess.ts';
import type { Logger } from '../log.ts';
import { bridgeShell, refuseUpgrade, SHELL_CLOSE, type ShellSockets } from '../api/shellSocket.ts';
import { SHELL_INTERNAL_CLOSE, SHELL_SPEC_HEADER, ShellSpecSchema } from './internalContract.ts';

const PATH = /^\/internal\/vms\/(vm_[A-Za-z0-9]+)\/shell$/;
const digest = (s: string) => createHash('sha256').update(s).digest();

/** A shell's end as the replica reads it back (internalClose ↔ remoteGuest.ts). */
export function internalClose(end: ShellEnd): { code: number; reason: string } {
  if (end.kind === 'exit') return { code: SHELL_INTERNAL_CLOSE.exited, reason: JSON.stringify({ exit_code: end.exit_code, signal: end.signal }) };
  let message = end.message;
  const json = () => JSON.stringify({ error: end.error.slice(0, 40), message });
  while (Buffer.byteLength(json()) > 123) message = message.slice(0, -1);
  return { code: SHELL_INTERNAL_CLOSE.cut, reason: json() };
}

export function serveInternalShellSockets(server: Server, o: { token: string; guest: GuestAccess | null; log: Logger }): ShellSockets {
  const want = digest(o.token);
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  const open = new Set<WebSocket>();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const requestId = `req_ws_${randomBytes(8).toString('hex')}`;
    socket.on('error', () => undefined);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token || !timingSafeEqual(digest(token), want)) return refuseUpgrade(socket, new ApiError('unauthorized', ''), requestId);
    const m = PATH.exec(new URL(req.url ?? '/', 'http://agentvm.invalid').pathname);
    if (!m) return refuseUpgrade(socket, new ApiError('not_found', 'no such path'), requestId);
    if (!o.guest) return refuseUpgrade(socket, new ApiError('unavailable', 'this host cannot run VMs', undefined, { 'Retry-After': '30' }), requestId);
    let spec;
    try {
      spec = ShellSpecSchema.parse(JSON.parse(Buffer.from(String(req.headers[SHELL_SPEC_HEADER] ?? ''), 'base64url').toString('utf8')));
    } catch {
      return refuseUpgrade(socket, new ApiError('invalid_request', `${SHELL_SPEC_HEADER}: not a shell spec`), requestId);
    }
    o.guest.openShell(m[1], spec).then(
      (shell) => {
        let joined = false;
        socket.once('close', () => joined || shell.close());
        wss.handleUpgrade(req, socket, head, (ws) => {
          joined = true;
          open.add(ws);
          ws.on('close', () => open.delete(ws));
          bridgeShell(ws, shell, internalClose);
        });
      },
      (err: Error) => {
        if (err instanceof ApiError) return refuseUpgrade(socket, err, requestId);
        o.log.warn({ err, vm_id: m[1] }, 'opening a shell for a replica failed');
        refuseUpgrade(socket, new ApiError('internal', ''), requestId);
      },
    );
  });
  return {
    close() {
      for (const ws of open) ws.close(SHELL_CLOSE.serverStopping, JSON.stringify({ error: 'vm_not_running', message: "the VM's host is restarting" }));
      wss.close();
    },
  };
}
