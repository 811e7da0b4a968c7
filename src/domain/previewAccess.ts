/**
 * What reaches a VM's TCP ports for previews (this process's VM host; a replica's way through the
 * VM's host is not built yet): a connection to a port in the guest, as a byte stream, and what listens.
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
