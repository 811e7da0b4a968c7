/**
 * Shells and files of this host's VMs: a request on the guest agent's channel opens each, its bytes
 * go on the VM's data port (vmm/dataChannel.ts) with a window of credit, so no file is ever whole in
 * this process's memory. The guest's refusals come back as the API's errors.
 */
import { DomainError, invalid } from '../domain/errors.ts';
import { tooLarge, type GuestAccess, type GuestRead, type GuestShell, type ShellEnd, type ShellOptions, type WriteOptions } from '../domain/guestAccess.ts';
import { decodeFault, type FileReadResult } from '../wire/protocol.ts';
import { faultError, FILE_STREAM_WINDOW, type StreamFault } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';
import type { QemuDriver } from '../vmm/qemu.ts';

/** How long the guest may take to open a shell or a file (a shell's start is a process or two under emulation). */
const OPEN_TIMEOUT_MS = 60_000;

const vmGone = () => new DomainError('vm_not_running', 'the VM is not running on its host', 'start the VM and wait until it is running');

/** A guest's refusal (`{fault, message}`) as the API's error; anything else is unexpected. */
export function guestError(err: unknown): Error {
  if (err instanceof DomainError) return err;
  const f = decodeFault((err as Error).message ?? '');
  if (f?.fault === 'path') return invalid('path', f.message);
  if (f?.fault === 'not_found') return new DomainError('not_found', `path: ${f.message}`);
  if (f?.fault === 'too_large') return tooLarge();
  if (/is not running|the channel (is )?closed/.test((err as Error).message ?? '')) return vmGone();
  return err as Error;
}

/** A cut stream as the API's error. */
export function faultToError(f: StreamFault): Error {
  if (f.error === 'payload_too_large') return tooLarge();
  if (f.error === 'vm_not_running') return new DomainError('vm_not_running', f.message, 'start the VM and wait until it is running');
  return faultError(f);
}

/** A shell on a data stream; output that comes before anyone listens waits for them. */
export class StreamShell implements GuestShell {
  readonly ended: Promise<ShellEnd>;
  private sink: ((chunk: Buffer, done: () => void) => void) | null = null;
  private early: Buffer[] = [];
  framed = false;

  constructor(private readonly stream: MuxStream) {
    stream.on('data', (chunk: Buffer) => {
      if (this.sink) this.sink(chunk, () => stream.consumed(chunk.length));
      else this.early.push(chunk);
    });
    this.ended = new Promise((resolve) => {
      stream.on('end', (info: { exit_code?: number | null; signal?: string | null }) => {
        stream.release();
        resolve({ kind: 'exit', exit_code: info.exit_code ?? null, signal: info.signal ?? null });
      });
      stream.on('abort', (f: StreamFault) => resolve({ kind: 'cut', error: f.error, message: f.message }));
    });
  }

  write(bytes: Buffer): Promise<void> {
    return this.stream.write(bytes);
  }

  resize(cols: number, rows: number): void {
    this.stream.control({ type: 'resize', cols, rows });
  }

  output(fn: (chunk: Buffer, done: () => void) => void): void {
    this.sink = fn;
    for (const chunk of this.early.splice(0)) fn(chunk, () => this.stream.consumed(chunk.length));
  }

  close(): void {
    this.stream.abort({ error: 'closed', message: 'the terminal was closed' });
  }
}

/** How long a download whose bytes have all come waits for the guest's end before the stream is let go. */
const LATE_END_MS = 30_000;

/**
 * A download's bytes as a web stream: the guest gets credit as the reader takes chunks. With
 * `expect.size` (the Content-Length answered; set once the guest has said it) the body ends once that many bytes have gone, without waiting for the
 * guest's end: a response left open after its last byte holds its connection, and a client that sent
 * its next request on it (as undici does once the length is reached) lost that request when the VM
 * stopped under the open response. The guest's end, when it comes, lets the stream go.
 */
export function streamBody(stream: MuxStream, expect: { size?: number } = {}): ReadableStream<Uint8Array> {
  const queue: Buffer[] = [];
  let ended = false;
  let fault: StreamFault | null = null;
  let wake: (() => void) | null = null;
  let sent = 0;
  let closed = false;
  stream.on('data', (b: Buffer) => (queue.push(b), wake?.()));
  stream.on('end', () => {
    ended = true;
    if (closed) stream.release();
    wake?.();
  });
  stream.on('abort', (f: StreamFault) => ((fault = f), wake?.()));
  const closeAtSize = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    closed = true;
    controller.close();
    if (ended) stream.release();
    else setTimeout(() => !ended && !fault && stream.abort({ error: 'cancelled', message: 'the guest did not end the download' }), LATE_END_MS).unref();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const size = expect.size;
        if (size === 0 && !closed) return closeAtSize(controller);
        while (!queue.length && !ended && !fault) await new Promise<void>((r) => (wake = r));
        wake = null;
        if (queue.length) {
          // Everything that has come goes on, as the pieces the port handed over (views of what the
          // socket read: no copy, and no new buffer for the collector to chase).
          let n = 0;
          for (const b of queue.splice(0)) {
            const part = size === undefined ? b : b.subarray(0, Math.max(0, size - sent));
            if (part.length) controller.enqueue(new Uint8Array(part.buffer, part.byteOffset, part.byteLength));
            sent += part.length;
            n += b.length;
          }
          stream.consumed(n);
          if (size !== undefined && sent >= size) closeAtSize(controller);
        } else if (fault) {
          controller.error(faultError(fault));
        } else {
          stream.release();
          controller.close();
        }
      },
      cancel() {
        if (!closed) stream.abort({ error: 'cancelled', message: 'the reader went away' });
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * Sends an upload's bytes on a stream whose guest side is open, ends it, and answers the guest's
 * last word; a body that fails, runs over `maxBytes` or falls short of `expectedBytes` aborts the
 * stream (the guest removes what it wrote).
 */
export async function pumpUpload(stream: MuxStream, body: AsyncIterable<Uint8Array>, opts: WriteOptions): Promise<{ path: string; size: number }> {
  const done = new Promise<{ path: string; size: number }>((resolve, reject) => {
    stream.on('end', (info: { path: string; size: number }) => {
      stream.release();
      resolve({ path: info.path, size: info.size });
    });
    stream.on('abort', (f: StreamFault) => reject(faultToError(f)));
  });
  done.catch(() => undefined);
  let size = 0;
  try {
    for await (const chunk of body) {
      if (stream.fault) break;
      size += chunk.byteLength;
      if (size > opts.maxBytes) throw tooLarge();
      await stream.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    }
    if (stream.fault) return await done;
    if (opts.expectedBytes !== undefined && size !== opts.expectedBytes) {
      throw new DomainError('invalid_request', `body: ${size} bytes came of the ${opts.expectedBytes} the Content-Length declared`);
    }
  } catch (err) {
    stream.abort({ error: 'cut', message: 'the upload was cut short' });
    if (err instanceof DomainError) throw err;
    if (stream.fault && stream.fault.error !== 'cut') throw faultToError(stream.fault);
    // The client went away (or its body broke): an expected end, answered to no one.
    throw new DomainError('invalid_request', 'body: the upload was cut short; nothing was written');
  }
  stream.end({});
  return done;
}

export class LocalGuestAccess implements GuestAccess {
  constructor(private readonly driver: QemuDriver) {}

  private async stream(vmId: string, window?: number): Promise<MuxStream> {
    await this.driver.dataReady(vmId);
    try {
      return this.driver.dataChannel(vmId).stream(window);
    } catch {
      throw vmGone();
    }
  }

  /** Asks the guest to open its side of `stream`; on a refusal the stream is let go. */
  private async open<T>(vmId: string, stream: MuxStream, op: string, args: object): Promise<T> {
    try {
      return await this.driver.request<T>(vmId, op, { stream: stream.id, ...args }, OPEN_TIMEOUT_MS);
    } catch (err) {
      // The guest may have opened its side after all (an answer too late): it hears that it is over.
      stream.abort({ error: 'cancelled', message: 'the host gave up waiting' });
      throw guestError(err);
    }
  }

  async openShell(vmId: string, opts: ShellOptions): Promise<GuestShell> {
    const stream = await this.stream(vmId);
    const shell = new StreamShell(stream);
    // A program in place of the shell, where the guest's agent can start one (protocol 7 on).
    const process = opts.process && (this.driver.facts(vmId)?.protocol ?? 0) >= 7 ? opts.process : undefined;
    const r = await this.open<{ framed?: boolean }>(vmId, stream, 'shell_open', { cols: opts.cols, rows: opts.rows, env: opts.env, ...(process ? { process } : {}) });
    shell.framed = process !== undefined && r?.framed === true;
    return shell;
  }

  async listProcesses(vmId: string): Promise<{ pid: number; meta: string }[] | null> {
    if ((this.driver.facts(vmId)?.protocol ?? 0) < 8) return null;
    try {
      return (await this.driver.request<{ processes: { pid: number; meta: string }[] }>(vmId, 'process_list', {}, OPEN_TIMEOUT_MS)).processes;
    } catch (err) {
      throw guestError(err);
    }
  }

  async attachProcess(vmId: string, pid: number): Promise<GuestShell | null> {
    if ((this.driver.facts(vmId)?.protocol ?? 0) < 8) return null;
    const stream = await this.stream(vmId);
    const shell = new StreamShell(stream);
    const r = await this.open<{ attached: boolean }>(vmId, stream, 'process_attach', { pid });
    if (!r.attached) {
      stream.release();
      return null;
    }
    shell.framed = true;
    return shell;
  }

  async readFile(vmId: string, path: string): Promise<GuestRead> {
    const stream = await this.stream(vmId, FILE_STREAM_WINDOW);
    const expect: { size?: number } = {};
    const body = streamBody(stream, expect);
    const r = await this.open<FileReadResult>(vmId, stream, 'file_read', { path, window: stream.window });
    if (r.kind === 'dir') {
      stream.release();
      return r;
    }
    expect.size = r.size;
    return { kind: 'file', path: r.path, size: r.size, body };
  }

  async writeFile(vmId: string, path: string, body: AsyncIterable<Uint8Array>, opts: WriteOptions): Promise<{ path: string; size: number }> {
    const stream = await this.stream(vmId, FILE_STREAM_WINDOW);
    await this.open(vmId, stream, 'file_write', { path, max_bytes: opts.maxBytes, window: stream.window });
    return pumpUpload(stream, body, opts);
  }
}
