/**
 * Files on the persist disk, for the host's files API: a directory's entries, a file's bytes out on a
 * data-port stream, a file's bytes in from one. Every path is checked by its letters (filesPath, as
 * the host did), then opened as the harness user by files.pl, which walks it a name at a time by
 * descriptor and never lets the kernel follow a link: what the user may not read or write is refused,
 * and a link swapped in under the walk leads nowhere. The agent opens what it opened again through
 * /proc (the same file, whatever its path has become since), with the flags the transfer wants. A file
 * being written is a hidden twin in the same directory until its last byte, then renamed into place
 * (by the user): a cut upload leaves nothing behind. Everything made belongs to the harness user.
 * Node built-ins only: bundled into the guest agent.
 */
import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { constants, promises as fsp } from 'node:fs';
import path from 'node:path';
import FILES_PERL from './files.pl';
import { dataPort } from './dataPort.ts';
import {
  encodeFault,
  FILES_ROOT,
  filesPath,
  HARNESS_USER,
  RESERVED_ROOT,
  type DirEntry,
  type FileReadArgs,
  type FileReadResult,
  type FileWriteArgs,
  type GuestFaultCode,
} from '../wire/protocol.ts';
import { DIRECT_BLOCK, framePayload, MAX_DATA_FRAME, MAX_WINDOW, MIN_WINDOW } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';

/**
 * A file is read a block at a time, four whole frames (1 MiB), payloads read in place, and past the
 * page cache (O_DIRECT): the virtual disk puts the bytes straight into them, where a read through the
 * cache has the guest copy each byte, and under emulation that copy costs as much as the port's own.
 */
const FRAMES_A_READ = 4;
const READ_BLOCK = FRAMES_A_READ * MAX_DATA_FRAME;

/** Directory listings stop here: a directory of more is listed in part (the answer says so by its length). */
const MAX_ENTRIES = 10_000;

const fault = (code: GuestFaultCode, message: string) => new Error(encodeFault(code, message));
const isCode = (err: unknown, ...codes: string[]) => codes.includes((err as NodeJS.ErrnoException).code ?? '');

function lexical(p: string): string {
  const r = filesPath(p);
  if ('problem' in r) throw fault('path', r.problem);
  return r.path;
}

/**
 * files.pl at work on one path, as the harness user: its answer lines, one at a time. It lives until
 * the agent is done with what it opened (its descriptors are reopened through /proc/PID/fd).
 */
class Opener {
  private readonly child: ChildProcess;
  private lines: string[] = [];
  private waiting: ((line: string | null) => void) | null = null;
  private ended = false;
  private stderr = '';

  constructor(args: string[]) {
    this.child = spawn(
      'perl',
      ['-e', FILES_PERL, process.arch, String(HARNESS_USER.uid), String(HARNESS_USER.gid), FILES_ROOT, RESERVED_ROOT, ...args],
      { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } },
    );
    let text = '';
    this.child.stdout!.setEncoding('utf8');
    this.child.stdout!.on('data', (c: string) => {
      text += c;
      let nl: number;
      while ((nl = text.indexOf('\n')) >= 0) {
        this.lines.push(text.slice(0, nl));
        text = text.slice(nl + 1);
      }
      this.wake();
    });
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (c: string) => (this.stderr = (this.stderr + c).slice(-2000)));
    this.child.stdin!.on('error', () => undefined);
    this.child.on('error', (err) => ((this.stderr += err.message), (this.ended = true), this.wake()));
    this.child.on('close', () => ((this.ended = true), this.wake()));
  }

  private wake(): void {
    const w = this.waiting;
    if (!w) return;
    if (this.lines.length) (this.waiting = null), w(this.lines.shift()!);
    else if (this.ended) (this.waiting = null), w(null);
  }

  /** Its next line; a `fault` line is thrown as the fault it names. */
  async next(): Promise<string> {
    const line = await new Promise<string | null>((resolve) => {
      this.waiting = resolve;
      this.wake();
    });
    if (line === null) throw new Error(`the files helper failed: ${this.stderr.trim() || 'no answer'}`);
    const f = /^fault (\w+) (.*)$/.exec(line);
    if (f) throw fault(f[1] === 'not_found' ? 'not_found' : 'path', f[2]);
    return line;
  }

  /** A descriptor it holds, as a path the agent may open. */
  fd(n: string): string {
    if (!/^\d+$/.test(n)) throw new Error(`the files helper answered a bad descriptor ${n}`);
    return `/proc/${this.child.pid}/fd/${n}`;
  }

  say(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  /** Done with it: it ends (a write not committed removes its twin). */
  done(): void {
    this.child.stdin!.end();
  }
}

/** A stream window the host asked for, checked before anything is opened for it. */
function checkWindow(w: number | undefined): void {
  if (w !== undefined && (!Number.isInteger(w) || w < MIN_WINDOW || w > MAX_WINDOW)) {
    throw new Error(`window must be an integer from ${MIN_WINDOW} to ${MAX_WINDOW}`);
  }
}

export async function readFile(args: FileReadArgs): Promise<FileReadResult> {
  const shown = lexical(args.path);
  checkWindow(args.window);
  const { mux } = await dataPort();
  if (mux.has(args.stream)) throw new Error(`stream ${args.stream} is in use`);
  const opener = new Opener(['read', shown]);
  try {
    const [kind, fd] = (await opener.next()).split(' ');
    const held = opener.fd(fd);
    if (kind === 'dir') {
      // Listed through the descriptor the user opened (it could read the directory).
      const names = (await fsp.readdir(held)).sort().slice(0, MAX_ENTRIES);
      const entries: DirEntry[] = [];
      for (const name of names) {
        const e = await fsp.lstat(path.join(held, name)).catch(() => null);
        if (!e) continue;
        entries.push({
          name,
          type: e.isSymbolicLink() ? 'link' : e.isDirectory() ? 'dir' : 'file',
          size: e.size,
          mtime: e.mtime.toISOString(),
        });
      }
      return { kind: 'dir', path: shown, entries };
    }
    if (kind !== 'file') throw new Error(`the files helper answered ${kind}`);
    // The file the user opened, opened again for reading past the page cache (a file system that
    // cannot, none under /persist, is read through it).
    let direct = true;
    const fh = await fsp.open(held, constants.O_RDONLY | constants.O_DIRECT).catch((err) => {
      if (!isCode(err, 'EINVAL')) throw err;
      direct = false;
      return fsp.open(held, constants.O_RDONLY);
    });
    const st = await fh.stat();
    if (!st.isFile()) {
      await fh.close();
      throw fault('path', `${shown} is not a regular file or a directory`);
    }
    const stream = mux.open(args.stream, args.window);
    void sendFile(fh, st.size, stream, direct);
    return { kind: 'file', path: shown, size: st.size };
  } finally {
    opener.done();
  }
}

/**
 * Sends `size` bytes of the file (its size when it was opened), then ends the stream; a cut stream
 * stops it. Each read (one readv, a round through the thread pool) fills the payloads of several
 * whole frames in place, from the disk when `direct`, and the frames go to the port as they are:
 * under emulation the guest's every copy and every round counts.
 */
async function sendFile(fh: fsp.FileHandle, size: number, stream: MuxStream, direct: boolean): Promise<void> {
  let sent = 0;
  // Blocks the port is done with are filled again: fresh memory costs a page fault a page, and
  // under emulation those cost more than the reads.
  const free: Buffer[] = [];
  /** No more blocks than a window's worth are ever in flight (the next waits for credit). */
  const kept = Math.ceil(stream.window / READ_BLOCK) + 1;
  const readBytes = FRAMES_A_READ * framePayload(MAX_DATA_FRAME, direct);
  try {
    while (sent < size && !stream.closed) {
      const want = Math.min(readBytes, size - sent);
      const block = free.pop() ?? Buffer.allocUnsafeSlow(READ_BLOCK);
      const { frames, payloads } = stream.framesFor(want, block, direct);
      // A whole last block may bring bytes of a file that grew since: only its size at opening goes.
      const bytesRead = Math.min(want, (await fh.readv(direct ? wholeBlocks(payloads) : payloads, sent)).bytesRead);
      if (bytesRead === 0) throw new Error('the file got shorter while it was read');
      if (bytesRead === want) await stream.writeFrames(frames, () => free.length < kept && free.push(block));
      else {
        // A short read (the file shrank): what came goes in ordinary frames, and that is the end.
        let left = bytesRead;
        for (const p of payloads) {
          if (left === 0) break;
          const n = Math.min(left, p.length);
          await stream.write(p.subarray(0, n));
          left -= n;
        }
        throw new Error('the file got shorter while it was read');
      }
      sent += bytesRead;
    }
    stream.end({ size: sent });
  } catch (err) {
    stream.abort({ error: 'read_failed', message: (err as Error).message });
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The last payload read up to a whole DIRECT_BLOCK (the end of the file comes first; framesFor left room). */
function wholeBlocks(payloads: Buffer[]): Buffer[] {
  const last = payloads[payloads.length - 1];
  const round = Math.ceil(last.length / DIRECT_BLOCK) * DIRECT_BLOCK;
  return [...payloads.slice(0, -1), Buffer.from(last.buffer, last.byteOffset, round)];
}

/**
 * Opens the file's hidden twin and answers; the bytes come on the stream. The stream ends with the
 * file in place (`{path, size}`), or is aborted with the twin removed.
 */
export async function writeFile(args: FileWriteArgs): Promise<{ ready: true; path: string }> {
  const shown = lexical(args.path);
  if (!Number.isInteger(args.max_bytes) || args.max_bytes < 0) throw new Error('max_bytes must be a non-negative integer');
  checkWindow(args.window);
  const { mux } = await dataPort();
  if (mux.has(args.stream)) throw new Error(`stream ${args.stream} is in use`);
  // The parents are made, and the twin created, by the user; a link on the way is written through
  // when it stays on the persist disk (as `cp` would).
  const twin = `.${path.basename(shown)}.agentvm-upload-${randomBytes(6).toString('hex')}`;
  const opener = new Opener(['write', shown, twin]);
  let fh: fsp.FileHandle;
  try {
    const [kind, fd] = (await opener.next()).split(' ');
    if (kind !== 'twin') throw new Error(`the files helper answered ${kind}`);
    fh = await fsp.open(opener.fd(fd), constants.O_WRONLY);
  } catch (err) {
    opener.done();
    throw err;
  }
  const stream = mux.open(args.stream, args.window);
  void receiveFile(fh, opener, shown, args.max_bytes, stream);
  return { ready: true, path: shown };
}

async function receiveFile(fh: fsp.FileHandle, opener: Opener, shown: string, max: number, stream: MuxStream): Promise<void> {
  let size = 0;
  let failed: Error | null = null;
  let ended = false;
  // Chunks wait here while a write is under way, then go down together (one writev for many).
  const waiting: Buffer[] = [];
  let writing: Promise<void> | null = null;
  let over = false;
  /** The twin goes (the helper removes it as it ends). */
  const discard = async () => {
    if (over) return;
    over = true;
    await fh.close().catch(() => undefined);
    opener.done();
  };
  const finish = async () => {
    if (failed) return discard();
    try {
      // On the disk before it has its name and the host says 201: a VM that dies a moment later
      // keeps the file (and a download past the page cache has nothing to wait for).
      await fh.datasync();
      await fh.close();
      opener.say('commit');
      await opener.next();
      over = true;
      opener.done();
      stream.end({ path: shown, size });
    } catch (err) {
      await discard();
      stream.abort({ error: 'write_failed', message: (err as Error).message });
    }
  };
  const drain = async () => {
    while (waiting.length && !failed) {
      const batch = waiting.splice(0);
      const bytes = batch.reduce((n, b) => n + b.length, 0);
      try {
        let done = 0;
        while (done < bytes) {
          const { bytesWritten } = await fh.writev(done === 0 ? batch : [Buffer.concat(batch).subarray(done)]);
          done += bytesWritten;
        }
        stream.consumed(bytes);
      } catch (err) {
        failed = err as Error;
        stream.abort({ error: isCode(err, 'ENOSPC') ? 'disk_full' : 'write_failed', message: (err as Error).message });
      }
    }
    writing = null;
    if (failed) return discard();
    if (ended) return finish();
  };
  stream.on('data', (chunk: Buffer) => {
    if (failed) return;
    size += chunk.length;
    if (size > max) {
      failed = new Error('too large');
      stream.abort({ error: 'payload_too_large', message: `the file is larger than ${max} bytes` });
      if (!writing) void discard();
      return;
    }
    waiting.push(chunk);
    writing ??= drain();
  });
  stream.on('abort', () => {
    failed ??= new Error('cut');
    if (!writing) void discard();
  });
  stream.on('end', () => {
    ended = true;
    if (!writing) void finish();
  });
}
