/**
 * The host's side of a guest's connections to its egress gateway. The guest has no network card and
 * QEMU no user-mode network: the guest agent listens on the gateway's address and tells the host of
 * each connection (`egress_open` on the agent port); the host opens a data-port stream for it, names
 * it to the guest (`egress_attach`) and hands it to the gateway as a connection of this VM. The VM is
 * the one whose port the stream came on: nothing the guest says names it. No process is started for
 * a connection, and a VM has at most MAX_EGRESS_CONNECTIONS open at once.
 */
import { Duplex } from 'node:stream';
import { agentRequest, type JsonLineChannel } from './channel.ts';
import type { DataChannel } from './dataChannel.ts';
import { FILE_STREAM_WINDOW } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';

/** Where a VM's gateway connections go (src/host/egress/gateway.ts). */
export interface GatewayPort {
  /** A connection of `vmId` to its gateway, as a byte stream. */
  accept(vmId: string, socket: Duplex): void;
  /**
   * Listens on a socket in the VM's directory whose connections are the VM's: a host process's way to
   * speak to a VM's gateway as that VM (root's only: the socket is root's, mode 0755; tests use it).
   */
  attach?(vmId: string, socketPath: string): Promise<void>;
  /** The VM is gone (its connections end with its data port). */
  detach(vmId: string): void;
}

/** Gateway connections one VM may have open at once; more are refused (the program's connection is closed). */
export const MAX_EGRESS_CONNECTIONS = Math.max(1, Number(process.env.AGENTVM_EGRESS_MAX_CONNECTIONS ?? 1024) || 1024);

/** A running VM as its gateway link sees it. */
export interface EgressVm {
  vmId: string;
  agent: JsonLineChannel;
  data: DataChannel;
  /** Resolves once the data port is in step with the guest (QemuDriver.dataReady). */
  dataReady(): Promise<void>;
  /** The VM is stopping or gone: nothing new is opened. */
  stopping(): boolean;
}

/**
 * Serves a VM's guest-opened gateway connections: answers the agent's `egress_open` events. `gateway`
 * null (a scrubbing VM): every connection is refused.
 */
export function linkEgress(vm: EgressVm, gateway: GatewayPort | null): (msg: Record<string, unknown>) => boolean {
  let open = 0;
  const refuse = (conn: number, stream?: number) => void agentRequest(vm.agent, 'egress_refuse', { conn, stream }, 60_000).catch(() => undefined);
  const attach = async (conn: number) => {
    if (!gateway || vm.stopping() || open >= MAX_EGRESS_CONNECTIONS) return refuse(conn);
    open++;
    let counted = true;
    const done = () => {
      if (counted) (counted = false), open--;
    };
    let socket: StreamDuplex | undefined;
    try {
      await vm.dataReady();
      if (vm.data.isClosed || vm.stopping()) throw new Error('the data port is closed');
      // A file's wide window: under emulation every grant of credit costs the guest wakeups.
      socket = new StreamDuplex(vm.data.stream(FILE_STREAM_WINDOW));
      socket.once('close', done);
      // A guest slow to answer (a busy one under emulation) still gets its connection; one that never
      // does has it refused, the stream with it (an attach that came late would leave it open).
      const { attached } = await agentRequest<{ attached: boolean }>(vm.agent, 'egress_attach', { conn, stream: socket.stream.id, window: socket.stream.window }, 60_000);
      if (!attached) return void socket.destroy();
      gateway.accept(vm.vmId, socket);
    } catch {
      socket?.destroy();
      done();
      refuse(conn, socket?.stream.id);
    }
  };
  return (msg) => {
    if (msg.event !== 'egress_open') return false;
    if (Number.isInteger(msg.conn)) void attach(msg.conn as number);
    return true;
  };
}

/**
 * A stream of the data port as a Node Duplex (what the egress gateway's HTTP server takes for a
 * connection): bytes read are granted back to the guest as the reader takes them, so a slow reader
 * holds back this stream only; destroying it aborts the stream.
 */
export class StreamDuplex extends Duplex {
  private owed = 0;

  constructor(readonly stream: MuxStream) {
    super({ allowHalfOpen: true });
    stream.on('data', (b: Buffer) => {
      if (this.push(b)) stream.consumed(b.length);
      else this.owed += b.length;
    });
    stream.on('end', () => this.push(null));
    stream.on('abort', () => this.destroy());
  }

  override _read(): void {
    if (!this.owed) return;
    const n = this.owed;
    this.owed = 0;
    this.stream.consumed(n);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.stream.write(chunk).then(() => done(), (err: Error) => done(err));
  }

  override _final(done: (err?: Error | null) => void): void {
    this.stream.end();
    done();
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    if (!this.stream.closed) this.stream.abort({ error: 'closed', message: 'the gateway closed the connection' });
    done(err);
  }
}
