/**
 * One stream of the data port's StreamMux (streams.ts): its window of credit, its writes as frames and
 * how it ends. Node built-ins only.
 */
import { EventEmitter } from 'node:events';
import { DIRECT_BLOCK, FRAME, faultError, framePayload, FRAME_HEADER_BYTES, MAX_WINDOW, MIN_WINDOW, STREAM_WINDOW, type StreamFault } from './frames.ts';
import type { StreamMux } from './streams.ts';

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
    const need = bytes + count * (lead + FRAME_HEADER_BYTES) + (direct ? DIRECT_BLOCK : 0);
    if (into && into.length < need) throw new Error(`${need} bytes of frames do not fit in ${into.length}`);
    const block = into ?? Buffer.allocUnsafeSlow(need);
    const frames: Buffer[] = [];
    const payloads: Buffer[] = [];
    for (let i = 0, at = 0; i < count; i++) {
      const n = Math.min(per, bytes - i * per);
      at += lead;
      const frame = block.subarray(at, at + FRAME_HEADER_BYTES + n);
      frame.writeUInt32BE(this.id, 0);
      frame.writeUInt8(FRAME.data, 4);
      frame.writeUInt32BE(n, 5);
      frames.push(frame);
      payloads.push(frame.subarray(FRAME_HEADER_BYTES));
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
      const n = frame.length - FRAME_HEADER_BYTES;
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

function parseJson(b: Buffer): Record<string, unknown> | null {
  try {
    const v = JSON.parse(b.toString('utf8')) as unknown;
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
