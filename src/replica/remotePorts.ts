/**
 * An API replica's way to the TCP ports of VMs on other machines, for previews and port forwards: a
 * connection goes to the host the VM's row names, as an HTTP upgrade of its internal endpoint
 * (INTERNAL_PORT_PATH), and the host joins it to a stream of the VM's data channel, so the bytes take
 * the same way into the guest as on the host itself; what listens is asked of the host.
 */
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { Db } from '../store/db.ts';
import type { Logger } from '../log.ts';
import type { ListeningPort, PortAccess } from '../domain/previewAccess.ts';
import { INTERNAL_PORT_PATH, INTERNAL_ROUTES, internalPath, PORT_UPGRADE } from '../host/internalContract.ts';
import * as endpoints from '../store/internalCredentials.ts';
import { HostUnreachable, type HostTarget, type InternalClient } from './internalClient.ts';
import { hostError, hostLost } from './remoteGuest.ts';

const LIST_MS = 20_000;

export class RemotePorts implements PortAccess {
  constructor(
    private readonly db: Db,
    private readonly client: InternalClient,
    private readonly log: Logger,
  ) {}

  private async host(vmId: string): Promise<HostTarget> {
    const row = await endpoints.endpointOfVm(this.db, vmId);
    if (!row?.internal_url) throw hostLost();
    return { url: row.internal_url, credentialHash: row.credential_hash };
  }

  private unreachable(vmId: string, err: unknown): never {
    if (err instanceof HostUnreachable) {
      this.log.warn({ err, vm_id: vmId }, "reaching the VM's host for a port failed");
      throw hostLost();
    }
    throw err;
  }

  async connect(vmId: string, port: number): Promise<Duplex | null> {
    const path = INTERNAL_PORT_PATH.replace(':id', encodeURIComponent(vmId)).replace(':port', String(port));
    let r: Awaited<ReturnType<InternalClient['upgrade']>>;
    try {
      r = await this.client.upgrade(await this.host(vmId), path, PORT_UPGRADE);
    } catch (err) {
      this.unreachable(vmId, err);
    }
    if ('socket' in r) {
      const socket = r.socket as Socket;
      // An end from either side passes on as an end; the other side may still answer.
      socket.allowHalfOpen = true;
      socket.setNoDelay(true);
      return socket;
    }
    if (r.answer.status === 502) {
      await r.answer.body?.cancel();
      return null;
    }
    throw await hostError(r.answer);
  }

  async list(vmId: string): Promise<ListeningPort[]> {
    const signal = AbortSignal.timeout(LIST_MS);
    let res: Response;
    try {
      res = await this.client.request(await this.host(vmId), internalPath('ports', vmId), { method: 'GET', signal });
    } catch (err) {
      this.unreachable(vmId, err);
    }
    if (!res.ok) throw await hostError(res);
    return INTERNAL_ROUTES.ports.response.parse(await res.json()).ports;
  }
}
