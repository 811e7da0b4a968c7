/**
 * Previews on this host: a connection to a port in a guest is a stream on the VM's data port (the
 * guest agent connects on its loopback and joins the two, guest/ports.ts), offered here as a Node
 * Duplex so that Node's HTTP client and an upgraded socket can use it as their socket. No network
 * path into the guest: the guest has no network card, and its loopback is reached from inside.
 */
import { Duplex } from 'node:stream';
import { DomainError } from '../domain/errors.ts';
import type { ListeningPort, PortAccess } from '../domain/previewAccess.ts';
import { faultError, type StreamFault } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';
import type { QemuDriver } from '../vmm/qemu.ts';
import { guestError } from './guestAccess.ts';

/** How long the guest may take to connect (its own loopback) or list its ports. */
const GUEST_MS = 15_000;

const vmGone = () => new DomainError('vm_not_running', 'the VM is not running on its host', 'start the VM and wait until it is running');

/**
 * A data stream as a Duplex: writes wait for the stream's credit, the guest gets credit back as the
 * reader takes bytes, an end is an end either way, and destroying it cuts the guest's connection.
 */
export class StreamSocket extends Duplex {
  private owed = 0;
  private ended = false;

  constructor(private readonly stream: MuxStream) {
    super({ allowHalfOpen: true });
    stream.on('data', (b: Buffer) => {
      if (this.push(b)) stream.consumed(b.length);
      else this.owed += b.length;
    });
    stream.on('end', () => {
      this.ended = true;
      this.push(null);
    });
    stream.on('abort', (f: StreamFault) => {
      // The guest's program closed its connection after it ended its side: a close, not a failure.
      if (this.ended || f.error === 'closed') {
        if (!this.ended) this.push(null);
        this.destroy();
      } else this.destroy(faultError(f));
    });
  }

  override _read(): void {
    if (this.owed) {
      const n = this.owed;
      this.owed = 0;
      this.stream.consumed(n);
    }
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.stream.write(chunk).then(() => cb(), (err: Error) => cb(err));
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.stream.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    if (!this.stream.closed) this.stream.abort({ error: 'closed', message: 'the preview connection was closed' });
    cb(err);
  }

  // What Node's HTTP client and server may ask of a socket.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

export class LocalPortAccess implements PortAccess {
  constructor(private readonly driver: QemuDriver) {}

  async connect(vmId: string, port: number): Promise<Duplex | null> {
    await this.driver.dataReady(vmId);
    let stream: MuxStream;
    try {
      stream = this.driver.dataChannel(vmId).stream();
    } catch {
      throw vmGone();
    }
    // Listening before the guest joins: bytes may come the moment it does. An error before the caller
    // listens (the VM gone while the guest connects) must not be thrown at no one: the caller's own
    // listeners hear it all the same.
    const socket = new StreamSocket(stream);
    socket.on('error', () => undefined);
    let r: { connected: boolean };
    try {
      r = await this.driver.request<{ connected: boolean }>(vmId, 'port_connect', { stream: stream.id, port, window: stream.window }, GUEST_MS);
    } catch (err) {
      stream.abort({ error: 'cancelled', message: 'the host gave up waiting' });
      throw guestError(err);
    }
    if (!r.connected) {
      stream.release();
      return null;
    }
    return socket;
  }

  async list(vmId: string): Promise<ListeningPort[]> {
    try {
      return (await this.driver.request<{ ports: ListeningPort[] }>(vmId, 'ports_list', {}, GUEST_MS)).ports;
    } catch (err) {
      throw guestError(err);
    }
  }
}
