/**
 * Files on the persist disk, for the host's files API: a directory's entries, a file's bytes out on a
 * data-port stream, a file's bytes in from one. Every path is checked twice: by its letters
 * (filesPath, as the host did) and by where it really leads once symbolic links are followed
 * (insideFilesRoot). A file being written is a hidden twin in the same directory until its last byte,
 * then renamed into place: a cut upload leaves nothing behind. What is made belongs to the harness user.
 * Node built-ins only: bundled into the guest agent.
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import path from 'node:path';
import { dataPort } from './dataPort.ts';
import {
  encodeFault,
  filesPath,
  HARNESS_USER,
  insideFilesRoot,
  type DirEntry,
  type FileReadArgs,
  type FileReadResult,
  type FileWriteArgs,
  type GuestFaultCode,
} from './protocol.ts';
import { DIRECT_BLOCK, framePayload, MAX_DATA_FRAME, MAX_WINDOW, MIN_WINDOW, type MuxStream } from './streams.ts';

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

/** The real path of an existing path, refused when its links lead off the persist disk. */
async function realInside(shown: string, p: string): Promise<string> {
  let real: string;
  try {
    real = await fsp.realpath(p);
  } catch (err) {
    if (isCode(err, 'ENOENT')) throw fault('not_found', `${shown} does not exist`);
    if (isCode(err, 'ENOTDIR')) throw fault('path', `${shown}: a part of it is not a directory`);
    if (isCode(err, 'ELOOP')) throw fault('path', `${shown}: too many symbolic links`);
    throw err;
  }
  if (!insideFilesRoot(real)) throw fault('path', `${shown} leads to ${real}, off the persist disk (a symbolic link points out)`);
  return real;
}

/** A stream window the host asked for, checked before anything is opened for it. */
function checkWindow(w: number | undefined): void {
  if (w !== undefined && (!Number.isInteger(w) || w < MIN_WINDOW || w > MAX_WINDOW)) {
    throw new Error(`window must be an integer from ${MIN_WINDOW} to ${MAX_WINDOW}`);
  }
}

export async function readFile(args: FileReadArgs): Promise<FileReadResult> {
  const shown = lexical(args.path);
  const real = await realInside(shown, shown);
  const st = await fsp.stat(real);
  if (st.isDirectory()) {
    const names = (await fsp.readdir(real)).sort().slice(0, MAX_ENTRIES);
    const entries: DirEntry[] = [];
    for (const name of names) {
      const e = await fsp.lstat(path.join(real, name)).catch(() => null);
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
  if (!st.isFile()) throw fault('path', `${shown} is not a regular file or a directory`);
  checkWindow(args.window);
  const { mux } = await dataPort();
  if (mux.has(args.stream)) throw new Error(`stream ${args.stream} is in use`);
  // A file system that cannot read past its cache (none under /persist) is read through it.
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW;
  let direct = true;
  const fh = await fsp.open(real, flags | constants.O_DIRECT).catch((err) => {
    if (!isCode(err, 'EINVAL')) throw err;
    direct = false;
    return fsp.open(real, flags);
  });
  const size = (await fh.stat()).size;
  const stream = mux.open(args.stream, args.window);
  void sendFile(fh, size, stream, direct);
  return { kind: 'file', path: shown, size };
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

/** Makes the missing directories of `dir` (the harness user's), refusing links that lead off the disk; answers its real path. */
async function makeParents(shownDir: string): Promise<string> {
  const parts = shownDir.split('/').filter(Boolean);
  let real = '/';
  for (let i = 0; i < parts.length; i++) {
    const next = path.join(real, parts[i]);
    const st = await fsp.lstat(next).catch((err) => (isCode(err, 'ENOENT') ? null : Promise.reject(err)));
    if (!st) {
      await fsp.mkdir(next, { mode: 0o755 }).catch((err) => (isCode(err, 'EEXIST') ? undefined : Promise.reject(err)));
      await fsp.chown(next, HARNESS_USER.uid, HARNESS_USER.gid);
      real = next;
      continue;
    }
    if (st.isSymbolicLink()) {
      real = await realInside(`/${parts.slice(0, i + 1).join('/')}`, next);
      if (!(await fsp.stat(real)).isDirectory()) throw fault('path', `/${parts.slice(0, i + 1).join('/')} is not a directory`);
      continue;
    }
    if (!st.isDirectory()) throw fault('path', `/${parts.slice(0, i + 1).join('/')} is not a directory`);
    real = next;
  }
  // The persist disk itself is the first step: a path that left it on the way is refused here.
  if (!insideFilesRoot(real)) throw fault('path', `${shownDir} leads off the persist disk`);
  return real;
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
  const dir = await makeParents(path.dirname(shown));
  const base = path.basename(shown);
  let target = path.join(dir, base);
  const existing = await fsp.lstat(target).catch(() => null);
  if (existing?.isSymbolicLink()) {
    // Written through, as `cp` would: only where the link leads on the persist disk.
    target = await realInside(shown, target).catch((err: Error) =>
      Promise.reject(/does not exist/.test(err.message) ? fault('path', `${shown} is a symbolic link to nothing`) : err),
    );
  }
  if (existing && (await fsp.stat(target)).isDirectory()) throw fault('path', `${shown} is a directory`);
  const twin = path.join(path.dirname(target), `.${path.basename(target)}.agentvm-upload-${randomBytes(6).toString('hex')}`);
  const fh = await fsp.open(twin, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  await fh.chown(HARNESS_USER.uid, HARNESS_USER.gid);
  const stream = mux.open(args.stream, args.window);
  void receiveFile(fh, twin, target, shown, args.max_bytes, stream);
  return { ready: true, path: shown };
}

async function receiveFile(fh: fsp.FileHandle, twin: string, target: string, shown: string, max: number, stream: MuxStream): Promise<void> {
  let size = 0;
  let failed: Error | null = null;
  let ended = false;
  // Chunks wait here while a write is under way, then go down together (one writev for many).
  const waiting: Buffer[] = [];
  let writing: Promise<void> | null = null;
  const discard = async () => {
    await fh.close().catch(() => undefined);
    await fsp.rm(twin, { force: true });
  };
  const finish = async () => {
    if (failed) return discard();
    try {
      // On the disk before it has its name and the host says 201: a VM that dies a moment later
      // keeps the file (and a download past the page cache has nothing to wait for).
      await fh.datasync();
      await fh.close();
      await fsp.rename(twin, target);
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
