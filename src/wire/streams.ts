/**
 * Byte streams between the host and the guest agent on the data port (DATA_PORT_NAME), beside the
 * JSON lines of the agent port: a shell's terminal, a file being read or written. Many streams share
 * the one port as frames; each stream has a window of credit so that one slow reader (a shell whose
 * program does not read its input, a download whose client is slow) holds back its own stream only.
 *
 * This file holds the multiplexer (StreamMux); a frame's layout and the sizes are in frames.ts, one
 * stream in muxStream.ts. The host picks stream ids and opens a stream with a request on the agent
 * port; the guest answers frames only for streams it has. Used by the host driver and the guest agent
 * alike: Node built-ins only.
 */
import { FRAME, frameHeader, FRAME_HEADER_BYTES, MAX_DATA_FRAME, MIN_WINDOW, STREAM_WINDOW, type FrameType, type StreamFault } from './frames.ts';
import { MuxStream } from './muxStream.ts';

/** Control, end and abort payloads are small JSON: a peer sending more is broken. */
const MAX_SMALL_FRAME = 64 * 1024;

/**
 * The streams of one port. `send` puts bytes on the port in call order (the host's socket, the
 * guest's sequential writer), and may call `written` once it is done with them; `feed` takes
 * whatever the port delivered, however it is cut.
 * While `raw` is set, bytes are counted, not parsed (the benchmark's measure of the bare channel).
 */
export class StreamMux {
  private readonly streams = new Map<number, MuxStream>();
  private header = Buffer.alloc(FRAME_HEADER_BYTES);
  private headerFill = 0;
  private current: { stream: number; type: number; left: number; parts: Buffer[] } | null = null;
  private raw: { left: number; done: () => void } | null = null;

  /**
   * `maxData`: the largest data payload this side sends in a frame (frames made by framesFor are at
   * most this long header included). Half a frame left in the port by a host that went away is
   * skipped by the next host's sync (see DataChannel).
   */
  constructor(
    private readonly send: (bytes: Buffer, written?: () => void) => void,
    readonly maxData: number = MAX_DATA_FRAME,
    /** Told when the other side breaks the protocol in a way that costs it a stream. */
    private readonly onViolation: (what: string) => void = () => undefined,
  ) {
    // A frame sent whole waits for credit for all of its payload: the window must always come back
    // to that much (the reader holds back less than a batch, a quarter of the window, of its grants).
    if (maxData > (MIN_WINDOW * 3) / 4) throw new Error('frames larger than the smallest window allows');
  }

  /**
   * A stream by id, made when absent (the host opens; the guest takes the id, and the window, the
   * host's request names).
   */
  open(id: number, window: number = STREAM_WINDOW): MuxStream {
    if (!Number.isInteger(id) || id <= 0 || id > 0xffffffff) throw new Error(`bad stream id ${id}`);
    let s = this.streams.get(id);
    if (!s) {
      s = new MuxStream(id, this, window);
      this.streams.set(id, s);
    }
    return s;
  }

  has(id: number): boolean {
    return this.streams.has(id);
  }

  get size(): number {
    return this.streams.size;
  }

  /** @internal */
  violation(what: string): void {
    this.onViolation(what);
  }

  /** @internal */
  forget(id: number): void {
    this.streams.delete(id);
  }

  /** @internal a frame already whole (header and payload in one buffer). */
  sendWhole(frame: Buffer, written?: () => void): void {
    this.send(frame, written);
  }

  /** @internal */
  sendFrame(stream: number, type: FrameType, payload: Buffer): void {
    this.send(payload.length ? Buffer.concat([frameHeader(stream, type, payload.length), payload]) : frameHeader(stream, type, 0));
  }

  /** Every stream is aborted: each is cut here, and the other side is told (if it can still hear). */
  abortAll(fault: StreamFault): void {
    for (const s of [...this.streams.values()]) s.abort(fault);
  }

  /** The port is gone: every stream is cut with `fault`. */
  closeAll(fault: StreamFault): void {
    for (const s of [...this.streams.values()]) s.cut(fault);
    this.header = Buffer.alloc(FRAME_HEADER_BYTES);
    this.headerFill = 0;
    this.current = null;
    this.raw = null;
  }

  /** The next `bytes` bytes that arrive are counted and dropped, not parsed; resolves when they have. */
  expectRaw(bytes: number): Promise<void> {
    return new Promise((resolve) => {
      if (bytes <= 0) return resolve();
      this.raw = { left: bytes, done: resolve };
    });
  }

  feed(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.raw) {
        const n = Math.min(this.raw.left, chunk.length - at);
        this.raw.left -= n;
        at += n;
        if (this.raw.left === 0) {
          const { done } = this.raw;
          this.raw = null;
          done();
        }
        continue;
      }
      if (!this.current) {
        const n = Math.min(FRAME_HEADER_BYTES - this.headerFill, chunk.length - at);
        chunk.copy(this.header, this.headerFill, at, at + n);
        this.headerFill += n;
        at += n;
        if (this.headerFill < FRAME_HEADER_BYTES) break;
        this.headerFill = 0;
        const stream = this.header.readUInt32BE(0);
        const type = this.header.readUInt8(4);
        const left = this.header.readUInt32BE(5);
        if (left > (type === FRAME.data ? MAX_DATA_FRAME : MAX_SMALL_FRAME)) throw new Error(`a frame of ${left} bytes is too large`);
        this.current = { stream, type, left, parts: [] };
        if (left === 0) this.deliver();
        continue;
      }
      const cur = this.current;
      const n = Math.min(cur.left, chunk.length - at);
      const piece = chunk.subarray(at, at + n);
      at += n;
      cur.left -= n;
      // Data goes on as it comes (no copy); the small frames are put together first.
      if (cur.type === FRAME.data) {
        this.streams.get(cur.stream)?.receive(FRAME.data, piece);
        if (cur.left === 0) this.current = null;
      } else {
        cur.parts.push(piece);
        if (cur.left === 0) this.deliver();
      }
    }
  }

  private deliver(): void {
    const cur = this.current!;
    this.current = null;
    if (cur.type === FRAME.data) return;
    this.streams.get(cur.stream)?.receive(cur.type, cur.parts.length === 1 ? cur.parts[0] : Buffer.concat(cur.parts));
  }
}

/** The sync marker of a token: the bytes a host reads on from after it connects (see DataChannel). */
export function syncMarker(token: string): Buffer {
  return Buffer.from(`\n~agentvm-data-sync~${token}~\n`, 'latin1');
}
