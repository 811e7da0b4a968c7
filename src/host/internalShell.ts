/**
 * A VM host's shell sockets for the API replicas (INTERNAL_SHELL_PATH): a live replica credential in the
 * Authorization header (internalAuth.ts), a VM placed on this host, the terminal's spec in
 * SHELL_SPEC_HEADER; the host's own credential goes back in the handshake's answer. The shell's end goes
 * back in the close, as JSON, for the replica to word for its customer.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { DomainError } from '../domain/errors.ts';
import type { GuestAccess, ShellEnd } from '../domain/guestAccess.ts';
import type { Logger } from '../log.ts';
import { refuseUpgrade } from '../http/errors.ts';
import { bridgeShell, SHELL_CLOSE, type ShellSockets } from '../http/shellBridge.ts';
import { HOST_CREDENTIAL_HEADER, SHELL_INTERNAL_CLOSE, SHELL_SPEC_HEADER, ShellSpecSchema } from './internalContract.ts';
import type { z } from 'zod';
import type { InternalAuthority } from './internalAuth.ts';
import { admitReplica } from './internalUpgrade.ts';
import type { FailureThrottle } from '../throttle.ts';

type ShellSpec = z.output<typeof ShellSpecSchema>;
const PATH = /^\/internal\/vms\/(vm_[A-Za-z0-9]+)\/shell$/;

/** A shell's end as the replica reads it back (internalClose ↔ remoteGuest.ts). */
export function internalClose(end: ShellEnd): { code: number; reason: string } {
  if (end.kind === 'exit') return { code: SHELL_INTERNAL_CLOSE.exited, reason: JSON.stringify({ exit_code: end.exit_code, signal: end.signal }) };
  let message = end.message;
  const json = () => JSON.stringify({ error: end.error.slice(0, 40), message });
  while (Buffer.byteLength(json()) > 123) message = message.slice(0, -1);
  return { code: SHELL_INTERNAL_CLOSE.cut, reason: json() };
}

export function serveInternalShellSockets(
  server: Server,
  o: { authority: InternalAuthority; throttle: FailureThrottle; guest: GuestAccess | null; log: Logger },
): ShellSockets {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  // Only an authenticated replica's handshake reaches handleUpgrade: its answer carries this host's credential.
  wss.on('headers', (headers) => headers.push(`${HOST_CREDENTIAL_HEADER}: ${o.authority.credential}`));
  const open = new Set<WebSocket>();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const requestId = `req_ws_${randomBytes(8).toString('hex')}`;
    socket.on('error', () => undefined);
    void (async () => {
      const refuse = await admitReplica(o, req, socket, requestId);
      if (!refuse) return;
      const m = PATH.exec(new URL(req.url ?? '/', 'http://agentvm.invalid').pathname);
      if (!m) return refuse(new DomainError('not_found', 'no such path'));
      if (!(await o.authority.holdsVm(m[1]))) return refuse(new DomainError('not_found', 'no such VM on this host'));
      if (!o.guest) return refuse(new DomainError('unavailable', 'this host cannot run VMs', undefined, { 'Retry-After': '30' }));
      let spec;
      try {
        spec = ShellSpecSchema.parse(JSON.parse(Buffer.from(String(req.headers[SHELL_SPEC_HEADER] ?? ''), 'base64url').toString('utf8')));
      } catch {
        return refuse(new DomainError('invalid_request', `${SHELL_SPEC_HEADER}: not a shell spec`));
      }
      openShell(m[1], spec, refuse);
    })().catch((err: Error) => {
      o.log.warn({ err }, 'a replica shell handshake failed');
      refuseUpgrade(socket, new DomainError('internal', ''), requestId);
    });

    function openShell(vmId: string, spec: ShellSpec, refuse: (err: DomainError) => void): void {
      o.guest!.openShell(vmId, spec).then(
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
          if (err instanceof DomainError) return refuse(err);
          o.log.warn({ err, vm_id: vmId }, 'opening a shell for a replica failed');
          refuse(new DomainError('internal', ''));
        },
      );
    }
  });
  return {
    close() {
      for (const ws of open) ws.close(SHELL_CLOSE.serverStopping, JSON.stringify({ error: 'vm_not_running', message: "the VM's host is restarting" }));
      wss.close();
    },
  };
}
