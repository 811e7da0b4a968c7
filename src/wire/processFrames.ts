/**
 * The frames of a program on a data stream (ProcessOpen, guest/process.ts): a frame is its letter, 8
 * hex digits of length and the bytes. From the guest: `P` the pid, `O` stdout, `E` stderr, `X` the
 * wait status. To it: `D` stdin bytes, `C` the end of stdin, and `K` a signal for the program's group
 * (the signal's number in place of a length, and no bytes).
 */

/** One frame to the guest: bytes, or for `K` and `C` a number and no bytes. */
export function processFrame(type: string, data: Buffer | number): Buffer {
  if (typeof data === 'number') return Buffer.from(type + data.toString(16).padStart(8, '0'));
  return Buffer.concat([Buffer.from(type + data.length.toString(16).padStart(8, '0')), data]);
}

/** Frames out of a stream's chunks, which may cut a frame anywhere. */
export class ProcessFrameReader {
  private buf: Buffer = Buffer.alloc(0);

  /** The whole frames the chunk completes (a partial one is held for the next). */
  push(chunk: Buffer): Array<{ type: string; data: Buffer }> {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const frames: Array<{ type: string; data: Buffer }> = [];
    while (this.buf.length >= 9) {
      const len = parseInt(this.buf.subarray(1, 9).toString('latin1'), 16);
      if (this.buf.length < 9 + len) break;
      frames.push({ type: String.fromCharCode(this.buf[0]), data: Buffer.from(this.buf.subarray(9, 9 + len)) });
      this.buf = this.buf.subarray(9 + len);
    }
    return frames;
  }
}

/** A wait status as an exit code or a signal's number. */
export function waitStatus(status: number): { exitCode: number | null; signal: number | null } {
  const sig = status & 0x7f;
  return sig ? { exitCode: null, signal: sig } : { exitCode: status >> 8, signal: null };
}
