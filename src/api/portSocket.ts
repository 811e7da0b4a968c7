/**
 * A port forward's WebSocket (`agentvm vms forward`, as `fly proxy`): /v1/api/vms/{id}/ports/{port}/socket
 * carries one TCP connection to the port in the guest, any protocol, its bytes as binary frames both
 * ways; the socket closes when the connection does. Admitted as the port's preview is (the tenant's API
 * key in `Authorization`, or the VM's preview token in `X-Agentvm-Preview-Token`, or a public port; an
 * address over its failed authentications is refused first), and a suspended `auto_resume` VM is woken.
 * Taken off the server ahead of the shell sockets; every other upgrade goes to them.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { createWebSocketStream, WebSocketServer } from 'ws';
import { DomainError } from '../domain/errors.ts';
import { checkedPort, type PreviewService } from '../domain/previews.ts';
import { joinStreams } from '../domain/previewAccess.ts';
import type { Logger } from '../log.ts';
import type { FailureThrottle } from '../throttle.ts';
import { credentials } from './preview.ts';
import { refuseUpgrade } from '../http/errors.ts';

export const PORT_SOCKET_PATH = '/v1/api/vms/{id}/ports/{port}/socket';
const PATH = /^\/v1\/api\/vms\/([^/]+)\/ports\/([^/]+)\/socket$/;

export function servePortSockets(server: Server, previews: PreviewService, throttle: FailureThrottle, log: Logger): void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  const others = server.listeners('upgrade') as ((req: IncomingMessage, socket: Duplex, head: Buffer) => void)[];
  server.removeAllListeners('upgrade');
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const m = PATH.exec(new URL(req.url ?? '/', 'http://agentvm.invalid').pathname);
    if (!m) return others.forEach((l) => l.call(server, req, socket, head));
    const requestId = `req_fw_${randomBytes(8).toString('hex')}`;
    socket.on('error', () => undefined);
    void (async () => {
      const port = checkedPort(m[2]);
      // A malformed id is no VM's (404), not a failure.
      const vmId = (() => {
        try {
          return decodeURIComponent(m[1]);
        } catch {
          return '';
        }
      })();
      const target = await previews.target({ vmId, port });
      await previews.admit(target, port, credentials(req), throttle, throttle.addressOf(req));
      // A forward that wakes the VM waits for its port as a preview request does.
      const guest = await previews.connect(target, port, await previews.running(target));
      if (socket.destroyed) return void guest.destroy();
      wss.handleUpgrade(req, socket, head, (ws) => {
        joinStreams(createWebSocketStream(ws), guest);
        // Traffic either way is activity for the idle stop (a forwarded database session, a debugger);
        // listened to once the two are joined (a reader before the pipe would take bytes from it).
        const active = () => previews.activity(target.vm_id);
        ws.on('message', active);
        guest.on('data', active);
      });
    })().catch((err: unknown) => {
      if (!(err instanceof DomainError)) log.error({ err: (err as Error).message, request_id: requestId }, 'a port forward failed');
      if (!socket.destroyed) refuseUpgrade(socket, err instanceof DomainError ? err : new DomainError('internal', ''), requestId);
    });
  });
}
