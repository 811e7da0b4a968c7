/**
 * The egress gateway's address inside the guest, served by the agent. The guest has no network card:
 * the gateway's address (EGRESS_GATEWAY_NAME in /etc/hosts) is on its loopback, and each connection a
 * program opens to it becomes a stream on the data port to the host, whose gateway takes it as this
 * VM's: the host knows the VM by the port the stream came on, never by anything the guest says. No
 * process is started for a connection, on either side.
 *
 * A connection waits, paused, until the host names its stream (`egress_attach`) or refuses it
 * (`egress_refuse`); the host opens streams only once the data port is in step (dataChannel.ts), so
 * nothing a connection sends is dropped by a sync. Node built-ins only: bundled into the guest agent.
 */
import net from 'node:net';
import { dataPort } from './dataPort.ts';
import { EGRESS_GATEWAY_PORT } from '../wire/protocol.ts';
import { FRAME, FRAME_HEADER_BYTES, MAX_DATA_FRAME, MAX_WINDOW, MIN_WINDOW, STREAM_WINDOW } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';

/** Connections waiting for the host's word, by number. */
const waiting = new Map<number, net.Socket>();
let nextConn = 1;
/** At most this many connections wait at once; more are closed at once (the host caps open ones). */
const MAX_WAITING = 1024;
/** Bytes of a program's connection that may wait for its stream's credit before the program is held back. */
const QUEUED_MAX = 1024 * 1024;
/** A connection the host has not answered in this long is closed. */
const WAIT_MS = 90_000;

export interface EgressAttachArgs {
  conn: number;
  stream: number;
  window?: number;
}

/**
 * Listens on the gateway's port (every address of the guest: the gateway's is one of its loopback's
 * once the guest is a VM). `notify` sends the host an event line on the agent port.
 */
export function startEgressListener(notify: (msg: object) => void, log: (msg: string) => void): void {
  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (sock) => {
    sock.on('error', () => undefined);
    if (waiting.size >= MAX_WAITING) return void sock.destroy();
    const conn = nextConn;
    nextConn = nextConn >= 0x7fffffff ? 1 : nextConn + 1;
    waiting.set(conn, sock);
    const timer = setTimeout(() => (waiting.get(conn) === sock ? (waiting.delete(conn), sock.destroy()) : undefined), WAIT_MS);
    sock.once('close', () => {
      clearTimeout(timer);
      if (waiting.get(conn) === sock) waiting.delete(conn);
    });
    notify({ event: 'egress_open', conn });
  });
  server.on('error', (err) => {
    log(`egress listener: ${err.message}; trying again in 1 s`);
    setTimeout(() => server.listen(EGRESS_GATEWAY_PORT, '0.0.0.0'), 1000);
  });
  server.listen(EGRESS_GATEWAY_PORT, '0.0.0.0');
}

/** `egress_attach`: the host's stream for a waiting connection; from here its bytes flow both ways. */
export async function egressAttach(args: EgressAttachArgs): Promise<{ attached: boolean }> {
  const window = args?.window ?? STREAM_WINDOW;
  if (!Number.isInteger(args?.stream) || args.stream <= 0 || !Number.isInteger(window) || window < MIN_WINDOW || window > MAX_WINDOW) {
    throw new Error('egress_attach needs a stream id and a valid window');
  }
  const sock = waiting.get(args.conn);
  if (!sock) return { attached: false }; // closed meanwhile: the host's stream is cut by the guest's abort below
  waiting.delete(args.conn);
  const { mux } = await dataPort();
  if (mux.has(args.stream)) {
    sock.destroy();
    throw new Error(`stream ${args.stream} is in use`);
  }
  splice(sock, mux.open(args.stream, window));
  return { attached: true };
}

/**
 * `egress_refuse`: the host will not take the connection (no gateway, too many open), or gave up on
 * its `egress_attach` (`stream`: the one it named, cut here if the attach came after all): it is closed.
 */
export async function egressRefuse(args: { conn: number; stream?: number }): Promise<{ refused: boolean }> {
  const sock = waiting.get(args?.conn);
  waiting.delete(args?.conn);
  sock?.destroy();
  const { mux } = await dataPort();
  if (Number.isInteger(args?.stream) && mux.has(args.stream!)) {
    mux.open(args.stream!).abort({ error: 'refused', message: 'the host gave up on the connection' });
    return { refused: true };
  }
  return { refused: Boolean(sock) };
}

/**
 * A connection's reads made straight into frames (`onread` of a socket this side opens): each read
 * lands in the room of a whole frame's payload, and the frame goes to the port as it is, with no copy,
 * so a large answer costs one read, one frame and one port write per 256 KiB, not per 64 KiB chunk
 * (under emulation the guest's relay was what held a preview's download back). A small read is copied
 * into a frame of its own size and its room read into again.
 */
export class FramedReads {
  private room = FramedReads.newRoom();
  private held: Buffer[] = [];
  private sink: ((frame: Buffer) => void) | null = null;

  constructor(private readonly stream: MuxStream) {}

  private static newRoom(): Buffer {
    return Buffer.allocUnsafeSlow(MAX_DATA_FRAME);
  }

  /** The socket's `onread` option. */
  readonly onread = {
    buffer: () => this.room.subarray(FRAME_HEADER_BYTES),
    callback: (n: number): boolean => {
      let frame: Buffer;
      if (n < COPY_BELOW) {
        frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + n);
        this.room.copy(frame, FRAME_HEADER_BYTES, FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + n);
      } else {
        frame = this.room.subarray(0, FRAME_HEADER_BYTES + n);
        this.room = FramedReads.newRoom();
      }
      frame.writeUInt32BE(this.stream.id, 0);
      frame.writeUInt8(FRAME.data, 4);
      frame.writeUInt32BE(n, 5);
      if (this.sink) this.sink(frame);
      else this.held.push(frame);
      return true;
    },
  };

  /** @internal splice takes the frames from here on (those read before it, first). */
  attach(sink: (frame: Buffer) => void): void {
    this.sink = sink;
    for (const f of this.held.splice(0)) sink(f);
  }
}

/** A read smaller than this is copied into a frame of its own (its 256 KiB room is read into again). */
const COPY_BELOW = 16 * 1024;

/**
 * A program's connection and its stream, joined: each side's end and abort reach the other (egress and
 * previews). `reads`: the socket reads into frames (FramedReads), else its chunks are sent as data.
 */
export function splice(sock: net.Socket, s: MuxStream, reads?: FramedReads): void {
  // Writes go out in order without waiting for each other; the program is held back only once this
  // much waits for the stream's credit (a pause and resume for every chunk halved what went up).
  let queued = 0;
  let last: Promise<unknown> = Promise.resolve();
  let ended = false;
  const sent = (written: Promise<void>, n: number) => {
    queued += n;
    if (queued >= QUEUED_MAX) sock.pause();
    last = written.catch(() => undefined);
    written.then(
      () => {
        queued -= n;
        if (queued < QUEUED_MAX && sock.isPaused()) sock.resume();
      },
      () => sock.destroy(),
    );
  };
  if (reads) reads.attach((frame) => sent(s.writeFrames([frame]), frame.length - FRAME_HEADER_BYTES));
  else sock.on('data', (chunk: Buffer) => sent(s.write(chunk), chunk.length));
  // The end goes after the program's last bytes: sent while writes still wait for credit, it would
  // overtake them (and they would fail as writes after the end), cutting off the tail of an answer.
  sock.on('end', () => {
    ended = true;
    void last.then(() => s.end());
  });
  // A program that closed after its end has its bytes delivered still; one that never ended is cut.
  sock.once('close', () => {
    if (!ended && !s.closed) s.abort({ error: 'closed', message: 'the guest program closed its connection' });
  });
  // Credit goes back once the program's socket has taken the bytes: a program that does not read
  // holds back its own connection only.
  s.on('data', (b: Buffer) => void sock.write(b, (err) => (err ? undefined : s.consumed(b.length))));
  s.on('end', () => sock.end());
  s.on('abort', () => sock.destroy());
  sock.resume();
}
