/**
 * Byte streams between the host and the guest agent on the data port (DATA_PORT_NAME), beside the
 * JSON lines of the agent port: a shell's terminal, a file being read or written. Many streams share
 * the one port as frames; each stream has a window of credit so that one slow reader (a shell whose
 * program does not read its input, a download whose client is slow) holds back its own stream only.
 *
 * A frame is a 9-byte header (stream id u32, type u8, payload length u32, big-endian) and its payload.
 * The host picks stream ids and opens a stream with a request on the agent port; the guest answers
 * frames only for streams it has. Used by the host driver and the guest agent alike: Node built-ins only.
 */
import { EventEmitter } from 'node:events';

export const FRAME = { data: 0, end: 1, credit: 2, abort: 3, control: 4 } as const;
type FrameType = (typeof FRAME)[keyof typeof FRAME];

/** Bytes a sender may have in flight on one stream before its reader grants more. */
export const STREAM_WINDOW = 2 * 1024 * 1024;
/**
 * The window of a file's stream: under emulation every grant costs the guest wakeups, and a writer
 * out of credit waits a round trip through both sides, so bulk bytes get a wider window (a file's
 * reader on either side only holds it in memory; a shell keeps the narrow one, so that what its
 * program floods out is never far ahead of the terminal).
 */
export const FILE_STREAM_WINDOW = 8 * 1024 * 1024;
/** The narrowest and widest windows a stream may have. */
export const MIN_WINDOW = 512 * 1024;
export const MAX_WINDOW = 64 * 1024 * 1024;
/** The largest data payload of one frame. */
export const MAX_DATA_FRAME = 256 * 1024;
/** The bytes of one frame header. */
export const FRAME_HEADER_BYTES = 9;
/** What a read that bypasses the page cache takes whole: the disk's logical block. */
export const DIRECT_BLOCK = 512;
const HEADER_BYTES = FRAME_HEADER_BYTES;
/** Control, end and abort payloads are small JSON: a peer sending more is broken. */
const MAX_SMALL_FRAME = 64 * 1024;

/** The payload of a whole data frame made by framesFor (`direct`: a whole number of DIRECT_BLOCK). */
export function framePayload(maxData: number, direct: boolean): number {
  const per = maxData - FRAME_HEADER_BYTES;
  return direct ? per - (per % DIRECT_BLOCK) : per;
}

/** Why a stream was cut, as the side that cut it says it. */
export interface StreamFault {
  error: string;
  message: string;
}

export function frameHeader(stream: number, type: FrameType, length: number): Buffer {
  const h = Buffer.allocUnsafe(HEADER_BYTES);
  h.writeUInt32BE(stream, 0);
  h.writeUInt8(type, 4);
  h.writeUInt32BE(length, 5);
  return h;
}

/**
 * One stream of a mux. Events: `data` (Buffer: the reader calls `consumed(n)` once it has dealt with
 * n bytes, which grants the writer more), `end` (the other side's closing JSON), `abort` (StreamFault),
 * `control` (JSON). After `end` or `abort` from both sides, or an abort from either, it is gone.
 */
export class MuxStream extends EventEmitter {
  private credit: number;
  private unacked = 0;
  /**
   * Data bytes received and not yet granted back: an honest writer never has more than the window
   * in flight, so more is a broken (or hostile) peer, and the stream is cut rather than buffered.
   */
  private inFlight = 0;
  private creditWaiters: (() => void)[] = [];
  /** Set once the stream is over (aborted by either side, or ended both ways). */
  fault: StreamFault | null = null;
  ended = { local: false, remote: false };

  /**
   * `window`: the bytes a writer may have in flight; both sides must use the same (the opener names
   * it in its request). The reader grants credit back in batches of a quarter of it (each grant is a
   * frame and, in the guest, a wakeup or two: under emulation they add up).
   */
  constructor(
    readonly id: number,
    private readonly mux: StreamMux,
    readonly window: number = STREAM_WINDOW,
  ) {
    super();
    if (!Number.isInteger(window) || window < MIN_WINDOW || window > MAX_WINDOW) throw new Error(`bad stream window ${window}`);
    this.credit = window;
  }

  get closed(): boolean {
    return this.fault !== null || (this.ended.local && this.ended.remote);
  }

  private tail: Promise<void> = Promise.resolve();

  /**
   * Sends bytes, in frames, waiting for credit when the reader is behind; rejects once the stream is
   * cut. Writes go out in the order they were called.
   */
  write(data: Buffer): Promise<void> {
    const next = this.tail.then(() => this.send(data));
    this.tail = next.catch(() => undefined);
    return next;
  }

  private async send(data: Buffer): Promise<void> {
    let offset = 0;
    while (offset < data.length) {
      if (this.fault) throw faultError(this.fault);
      if (this.ended.local) throw new Error('write after end');
      if (this.credit <= 0) {
        await new Promise<void>((resolve) => this.creditWaiters.push(resolve));
        continue;
      }
      const n = Math.min(data.length - offset, this.credit, this.mux.maxData);
      this.credit -= n;
      this.mux.sendFrame(this.id, FRAME.data, data.subarray(offset, offset + n));
      offset += n;
    }
  }

  /**
   * Room for `bytes` bytes of data as whole frames laid out in one buffer, each frame, header
   * included, at most the mux's maxData (256 KiB: a whole number of port writes). The caller fills
   * `payloads` in place (a file read straight into them), then hands `frames` to writeFrames, and the
   * bytes go to the port with no copy on the way. `into`: a buffer to lay them in (one the port is
   * done with), instead of a new one. `direct`: laid out for a read that bypasses the page cache
   * (O_DIRECT): every payload starts at a multiple of 4 bytes from the buffer's start, and all but
   * the last are a whole number of DIRECT_BLOCK; the buffer has room to read the last one up to a
   * whole block too. Otherwise the frames lie end to end.
   */
  framesFor(bytes: number, into?: Buffer, direct = false): { frames: Buffer[]; payloads: Buffer[] } {
    const per = framePayload(this.mux.maxData, direct);
    // Direct: 3 bytes before each header put its payload at 12 bytes into the frame's slot.
    const lead = direct ? 3 : 0;
    const count = Math.max(1, Math.ceil(bytes / per));
    const need = bytes + count * (lead + HEADER_BYTES) + (direct ? DIRECT_BLOCK : 0);
    if (into && into.length < need) throw new Error(`${need} bytes of frames do not fit in ${into.length}`);
    const block = into ?? Buffer.allocUnsafeSlow(need);
    const frames: Buffer[] = [];
    const payloads: Buffer[] = [];
    for (let i = 0, at = 0; i < count; i++) {
      const n = Math.min(per, bytes - i * per);
      at += lead;
      const frame = block.subarray(at, at + HEADER_BYTES + n);
      frame.writeUInt32BE(this.id, 0);
      frame.writeUInt8(FRAME.data, 4);
      frame.writeUInt32BE(n, 5);
      frames.push(frame);
      payloads.push(frame.subarray(HEADER_BYTES));
      at += frame.length;
    }
    return { frames, payloads };
  }

  /**
   * Sends data frames made by framesFor, whole and as they are, each once the window has room for
   * all of its payload; rejects once the stream is cut. In order with write(). `written` is called
   * once the port is done with the last of them (their buffer may be filled again), when the port
   * tells (the guest's does): never for frames of a stream cut before they were sent.
   */
  writeFrames(frames: Buffer[], written?: () => void): Promise<void> {
    const next = this.tail.then(() => this.sendFrames(frames, written));
    this.tail = next.catch(() => undefined);
    return next;
  }

  private async sendFrames(frames: Buffer[], written?: () => void): Promise<void> {
    for (const [i, frame] of frames.entries()) {
      const n = frame.length - HEADER_BYTES;
      for (;;) {
        if (this.fault) throw faultError(this.fault);
        if (this.ended.local) throw new Error('write after end');
        if (this.credit >= n) break;
        await new Promise<void>((resolve) => this.creditWaiters.push(resolve));
      }
      this.credit -= n;
      this.mux.sendWhole(frame, i === frames.length - 1 ? written : undefined);
    }
  }

  /** Whether a write of this many bytes would go out without waiting. */
  get writable(): number {
    return this.credit;
  }

  /** The reader has dealt with `n` bytes: grant them back to the writer (in batches, to save frames). */
  consumed(n: number): void {
    if (this.closed) return;
    this.unacked += n;
    if (this.unacked >= this.window / 4) {
      const b = Buffer.allocUnsafe(4);
      b.writeUInt32BE(this.unacked, 0);
      this.inFlight -= this.unacked;
      this.unacked = 0;
      this.mux.sendFrame(this.id, FRAME.credit, b);
    }
  }

  /** No more bytes from this side; `info` tells the other side how it ended. */
  end(info: object = {}): void {
    if (this.fault || this.ended.local) return;
    this.ended.local = true;
    this.mux.sendFrame(this.id, FRAME.end, Buffer.from(JSON.stringify(info)));
    if (this.closed) this.mux.forget(this.id);
  }

  /** Cuts the stream both ways and tells the other side why. */
  abort(fault: StreamFault): void {
    if (this.closed) return;
    this.mux.sendFrame(this.id, FRAME.abort, Buffer.from(JSON.stringify(fault)));
    this.cut(fault);
  }

  /** Done with a stream the other side has ended: forget it without a word (it has nothing more to hear). */
  release(): void {
    this.ended.local = true;
    this.mux.forget(this.id);
  }

  control(msg: object): void {
    if (!this.closed) this.mux.sendFrame(this.id, FRAME.control, Buffer.from(JSON.stringify(msg)));
  }

  /** @internal the mux delivers a frame. */
  receive(type: number, payload: Buffer): void {
    switch (type) {
      case FRAME.data:
        if (this.ended.remote || this.fault) break;
        this.inFlight += payload.length;
        if (this.inFlight > this.window) {
          const fault = { error: 'window_exceeded', message: `the other side sent more than the stream's window (${this.window} bytes) without credit` };
          this.mux.violation(`stream ${this.id}: ${fault.message}`);
          this.abort(fault);
          break;
        }
        this.emit('data', payload);
        break;
      case FRAME.credit:
        this.credit += payload.readUInt32BE(0);
        for (const w of this.creditWaiters.splice(0)) w();
        break;
      case FRAME.end:
        if (this.ended.remote || this.fault) break;
        this.ended.remote = true;
        this.emit('end', parseJson(payload) ?? {});
        if (this.closed) this.mux.forget(this.id);
        break;
      case FRAME.abort:
        this.cut((parseJson(payload) as StreamFault | null) ?? { error: 'aborted', message: 'the other side cut the stream' });
        break;
      case FRAME.control: {
        const msg = parseJson(payload);
        if (msg) this.emit('control', msg);
        break;
      }
    }
  }

  /** @internal the stream is over without telling the other side (it cut it, or the port is gone). */
  cut(fault: StreamFault): void {
    if (this.fault) return;
    this.fault = fault;
    this.mux.forget(this.id);
    for (const w of this.creditWaiters.splice(0)) w();
    this.emit('abort', fault);
  }
}

export function faultError(f: StreamFault): Error {
  return Object.assign(new Error(f.message), { code: f.error });
}

function parseJson(b: Buffer): Record<string, unknown> | null {
  try {
    const v = JSON.parse(b.toString('utf8')) as unknown;
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * The streams of one port. `send` puts bytes on the port in call order (the host's socket, the
 * guest's sequential writer), and may call `written` once it is done with them; `feed` takes
 * whatever the port delivered, however it is cut.
 * While `raw` is set, bytes are counted, not parsed (the benchmark's measure of the bare channel).
 */
export class StreamMux {
  private readonly streams = new Map<number, MuxStream>();
  private header = Buffer.alloc(HEADER_BYTES);
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
    this.header = Buffer.alloc(HEADER_BYTES);
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
        const n = Math.min(HEADER_BYTES - this.headerFill, chunk.length - at);
        chunk.copy(this.header, this.headerFill, at, at + n);
        this.headerFill += n;
        at += n;
        if (this.headerFill < HEADER_BYTES) break;
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
