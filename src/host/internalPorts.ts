/**
 * A VM host's connections to its guests' TCP ports for the API replicas (INTERNAL_PORT_PATH): a live
 * replica credential, a VM placed on this host, and an HTTP upgrade; the answer is `101` once the guest
 * has connected to the port, then the bytes pass both ways (a replica's preview request or forwarded
 * connection). Taken off the server ahead of the shell sockets; every other upgrade goes to them.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { DomainError } from '../domain/errors.ts';
import { checkedPort } from '../domain/previews.ts';
import { joinStreams, type PortAccess } from '../domain/previewAccess.ts';
import type { Logger } from '../log.ts';
import { refuseUpgrade } from '../http/errors.ts';
import type { FailureThrottle } from '../throttle.ts';
import { HOST_CREDENTIAL_HEADER, PORT_UPGRADE } from './internalContract.ts';
import type { InternalAuthority } from './internalAuth.ts';
import { admitReplica } from './internalUpgrade.ts';

const PATH = /^\/internal\/vms\/(vm_[A-Za-z0-9]+)\/ports\/([^/]+)\/connect$/;

export function serveInternalPorts(
  server: Server,
  o: { authority: InternalAuthority; throttle: FailureThrottle; ports: PortAccess | null; log: Logger },
): void {
  const others = server.listeners('upgrade') as ((req: IncomingMessage, socket: Duplex, head: Buffer) => void)[];
  server.removeAllListeners('upgrade');
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const m = PATH.exec(new URL(req.url ?? '/', 'http://agentvm.invalid').pathname);
    if (!m || String(req.headers.upgrade ?? '').toLowerCase() !== PORT_UPGRADE) return others.forEach((l) => l.call(server, req, socket, head));
    const requestId = `req_pc_${randomBytes(8).toString('hex')}`;
    socket.on('error', () => undefined);
    void (async () => {
      const refuse = await admitReplica(o, req, socket, requestId);
      if (!refuse) return;
      try {
        const vmId = m[1];
        const port = checkedPort(m[2]);
        if (!(await o.authority.holdsVm(vmId))) return refuse(new DomainError('not_found', 'no such VM on this host'));
        if (!o.ports) return refuse(new DomainError('unavailable', 'this host cannot run VMs', undefined, { 'Retry-After': '30' }));
        const guest = await o.ports.connect(vmId, port);
        if (!guest) return refuse(new DomainError('port_closed', `nothing listens on port ${port} in VM ${vmId}`, 'start a server in the VM that listens on that port'));
        if (socket.destroyed) return void guest.destroy();
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${PORT_UPGRADE}\r\n${HOST_CREDENTIAL_HEADER}: ${o.authority.credential}\r\n\r\n`);
        if (head.length) guest.write(head);
        joinStreams(socket, guest);
      } catch (err) {
        if (err instanceof DomainError) return refuse(err);
        o.log.warn({ err, path: req.url }, 'a port connection for a replica failed');
        refuse(new DomainError('internal', ''));
      }
    })().catch((err: Error) => {
      o.log.warn({ err }, 'a replica port handshake failed');
      refuseUpgrade(socket, new DomainError('internal', ''), requestId);
    });
  });
}
