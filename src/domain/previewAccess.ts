/**
 * What reaches a VM's TCP ports for previews and port forwards (host/portAccess.ts on the VM's host,
 * replica/remotePorts.ts on an API replica, through the host): a connection to a port in the guest, as
 * a byte stream, and what listens.
 */
import type { Duplex } from 'node:stream';

export interface ListeningPort {
  port: number;
  process: string | null;
}

export interface PortAccess {
  /** A connection to `port` on the guest's loopback; null when nothing listens there. */
  connect(vmId: string, port: number): Promise<Duplex | null>;
  /** The ports listening in the guest now. */
  list(vmId: string): Promise<ListeningPort[]>;
}

/**
 * Joins two byte streams (a client's connection and a guest's port): each end passes on as an end (the
 * other side may still answer), a failure or a close before the end cuts both.
 */
export function joinStreams(a: Duplex, b: Duplex): void {
  const cut = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', cut);
  b.on('error', cut);
  a.once('close', () => a.readableEnded || b.destroy());
  b.once('close', () => b.readableEnded || a.destroy());
  a.pipe(b);
  b.pipe(a);
}
