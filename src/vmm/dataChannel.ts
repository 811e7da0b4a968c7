/**
 * The host's end of a VM's data port (see wire/streams.ts): byte streams to and from the guest
 * agent, beside its JSON channel. The host picks stream ids. The socket closing (the VM stopped, its
 * QEMU died) cuts every stream with a reason a customer can read.
 *
 * Nothing the guest sends is held beyond what a stream's window allows: a stream whose guest sends
 * past its window is cut (muxStream.ts), a frame longer than the protocol's is the end of the port's
 * streams; either is reported as `violation` (a message for the log).
 */
import { EventEmitter } from 'node:events';
import { randomInt } from 'node:crypto';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import type { StreamFault } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';
import { StreamMux, syncMarker } from '../wire/streams.ts';

export const VM_GONE: StreamFault = { error: 'vm_not_running', message: 'the VM stopped' };

export class DataChannel extends EventEmitter {
  private readonly mux: StreamMux;
  /**
   * Stream ids start anywhere: frames a guest queued for an earlier connection (this host's process
   * restarted under a transfer) name ids this one never uses, and are dropped.
   */
  private nextId = 1 + randomInt(2 ** 30);
  private closedWith: StreamFault | null = null;

  private constructor(private readonly socket: net.Socket) {
    super();
    this.mux = new StreamMux(
      (bytes) => {
        if (!socket.destroyed) socket.write(bytes);
      },
      undefined,
      (what) => this.emit('violation', what),
    );
    socket.on('data', (chunk: Buffer) => {
      try {
        const rest = this.sync ? this.seekMarker(chunk) : chunk;
        if (rest?.length) this.mux.feed(rest);
      } catch (err) {
        // A guest that breaks the framing loses its streams; the VM itself goes on.
        this.emit('violation', (err as Error).message);
        this.mux.closeAll({ error: 'internal', message: 'the guest broke the data port protocol' });
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => this.close(VM_GONE));
  }

  /**
   * Until the guest's sync marker comes, what the port brings is an earlier host's leftovers (frames
   * half-written when its process ended) and is dropped. `token` goes to the guest in `data_sync`.
   */
  private sync: { token: string; marker: Buffer; seen: Buffer } | null = null;

  /** The token the guest agent's `data_sync` must echo on the port; ask for it before the first stream. */
  startSync(): string {
    const token = randomBytes(16).toString('hex');
    this.sync = { token, marker: syncMarker(token), seen: Buffer.alloc(0) };
    return token;
  }

  private seekMarker(chunk: Buffer): Buffer | null {
    const s = this.sync!;
    const all = Buffer.concat([s.seen, chunk]);
    const at = all.indexOf(s.marker);
    if (at < 0) {
      s.seen = all.subarray(Math.max(0, all.length - s.marker.length + 1));
      return null;
    }
    this.sync = null;
    return all.subarray(at + s.marker.length);
  }

  static connect(socketPath: string, timeoutMs = 2000): Promise<DataChannel> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      const timer = setTimeout(() => (socket.destroy(), reject(new Error(`connect ${socketPath}: timed out`))), timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.setNoDelay?.(true);
        resolve(new DataChannel(socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  get isClosed(): boolean {
    return this.closedWith !== null;
  }

  /** A new stream; the guest learns of it (and of its window) from the request that names its id. */
  stream(window?: number): MuxStream {
    if (this.closedWith) throw Object.assign(new Error(this.closedWith.message), { code: this.closedWith.error });
    const id = this.nextId++;
    return this.mux.open(id, window);
  }

  /** How many streams are open (shells, transfers). */
  get open(): number {
    return this.mux.size;
  }

  /** The benchmark's bare channel: writes `bytes` bytes of zeros as they are, no frames. */
  writeRaw(bytes: number, chunk = 256 * 1024): Promise<void> {
    const zeros = Buffer.alloc(chunk);
    return new Promise((resolve, reject) => {
      let left = bytes;
      const pump = () => {
        while (left > 0) {
          const n = Math.min(left, chunk);
          left -= n;
          if (!this.socket.write(zeros.subarray(0, n))) return void this.socket.once('drain', pump);
        }
        resolve();
      };
      this.socket.once('close', () => reject(new Error('the data port closed')));
      pump();
    });
  }

  /** The benchmark's bare channel: resolves once `bytes` raw bytes have come. */
  expectRaw(bytes: number): Promise<void> {
    return this.mux.expectRaw(bytes);
  }

  close(fault: StreamFault = VM_GONE): void {
    if (this.closedWith) return;
    this.closedWith = fault;
    this.mux.closeAll(fault);
    this.socket.destroy();
  }
}
