/**
 * The guest's end of the data port, opened once, here. A `cat` reads the port into a pipe that Node
 * reads evented, in whatever sizes have gathered: reading the port itself would cost a thread-pool
 * round for each page it hands out (4 KiB), which halves what comes in. Writes go straight to the
 * port, one writev of many pieces at a time (measured: through a second `cat` they went slower). A
 * host that goes away (the port's reads end) cuts every stream. Node built-ins only: bundled into
 * the guest agent.
 */
import { spawn } from 'node:child_process';
import { promises as fsp, openSync, writev } from 'node:fs';
import path from 'node:path';
import { DATA_PORT_NAME } from '../wire/protocol.ts';
import { StreamMux, syncMarker } from '../wire/streams.ts';

/** The device of the virtio port named `name`, once it is there. */
export async function findPort(name: string): Promise<string> {
  for (;;) {
    for (const entry of await fsp.readdir('/sys/class/virtio-ports').catch(() => [] as string[])) {
      const n = await fsp.readFile(`/sys/class/virtio-ports/${entry}/name`, 'utf8').catch(() => '');
      if (n.trim() === name) return path.join('/dev', entry);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface DataPort {
  mux: StreamMux;
  /** Puts the sync marker of `token` on the port, after dropping what was queued for an earlier host. */
  sync(token: string): void;
  /** Writes `bytes` bytes of zeros straight to the port, not as frames (the benchmark's bare channel). */
  writeRaw(bytes: number): Promise<void>;
}

let port: Promise<DataPort> | null = null;

/** The data port, opened once on first use (the agent starts it when it starts). */
export function dataPort(): Promise<DataPort> {
  port ??= findPort(DATA_PORT_NAME).then(serve);
  return port;
}

function log(msg: string): void {
  process.stderr.write(`agentvm-agent: data port: ${msg}\n`);
}

/** The kernel takes at most this much of one write on the port (and of each piece of a writev). */
const PORT_WRITE = 32 * 1024;
/** Bytes handed to one writev: its pieces go on the port one after another in one system call. */
const BATCH_BYTES = 1024 * 1024;
/** Queued pieces smaller than this are copied together (a frame header, a keystroke's echo, a credit). */
const SMALL = 4096;

/** Bytes queued for the port, and who waits for the port to be done with them. */
interface Queued {
  bytes: Buffer;
  written?: () => void;
}

/**
 * The pieces of one port write: up to BATCH_BYTES of `queue` (taken off it), views that lie end to
 * end in memory (the frames of one file read) joined, small ones copied together, and everything
 * cut at PORT_WRITE so that each piece is one write the kernel takes whole.
 */
export function takeBatch(queue: Queued[]): { pieces: Buffer[]; written: (() => void)[] } {
  const joined: Buffer[] = [];
  const written: (() => void)[] = [];
  let bytes = 0;
  while (queue.length && bytes < BATCH_BYTES) {
    const { bytes: b, written: w } = queue.shift()!;
    if (w) written.push(w);
    bytes += b.length;
    const last = joined[joined.length - 1];
    if (last && last.buffer === b.buffer && last.byteOffset + last.length === b.byteOffset) {
      joined[joined.length - 1] = Buffer.from(b.buffer, last.byteOffset, last.length + b.length);
    } else joined.push(b);
  }
  const pieces: Buffer[] = [];
  let small: Buffer[] = [];
  let smallBytes = 0;
  const gather = () => {
    if (small.length) pieces.push(small.length === 1 ? small[0] : Buffer.concat(small, smallBytes));
    small = [];
    smallBytes = 0;
  };
  for (const b of joined) {
    if (b.length < SMALL) {
      if (smallBytes + b.length > PORT_WRITE) gather();
      small.push(b);
      smallBytes += b.length;
      continue;
    }
    gather();
    for (let at = 0; at < b.length; at += PORT_WRITE) pieces.push(b.subarray(at, at + PORT_WRITE));
  }
  gather();
  return { pieces, written };
}

/** `pieces` without their first `n` bytes (what a short writev left). */
export function skip(pieces: Buffer[], n: number): Buffer[] {
  let i = 0;
  while (i < pieces.length && n >= pieces[i].length) n -= pieces[i++].length;
  const rest = pieces.slice(i);
  if (n && rest.length) rest[0] = rest[0].subarray(n);
  return rest;
}

function serve(device: string): DataPort {
  const fd = openSync(device, 'r+');
  // The writer: one writev on the port at a time, in order (writes of one descriptor from the thread
  // pool could land out of order), each of many pieces: a round through the thread pool costs the
  // guest about as much as the kernel's taking 32 KiB, so what is queued meanwhile goes down together.
  const queue: Queued[] = [];
  let writing = false;
  /** Counts the hosts: what was queued for one that went is not written for the next. */
  let generation = 0;
  const drained: (() => void)[] = [];
  /** Drops what is queued (its host is gone): its buffers are free again. */
  const drop = () => {
    for (const q of queue.splice(0)) q.written?.();
  };
  const flush = () => {
    if (writing) return;
    if (queue.length === 0) {
      for (const w of drained.splice(0)) w();
      return;
    }
    writing = true;
    const gen = generation;
    const batch = takeBatch(queue);
    const writeAll = (pieces: Buffer[]) =>
      writev(fd, pieces, null, (err, n) => {
        if (err?.code === 'EAGAIN') return setTimeout(() => writeAll(pieces), 5);
        if (err) drop(); // no host on the port: what was queued is lost with its streams
        // The rest of a batch for a host that has gone since is dropped (the next host syncs past it).
        else if (gen === generation) {
          const rest = skip(pieces, n);
          if (rest.length) return writeAll(rest);
        }
        writing = false;
        for (const w of batch.written) w();
        flush();
      });
    writeAll(batch.pieces);
  };
  const send = (bytes: Buffer, written?: () => void) => {
    queue.push({ bytes, written });
    flush();
  };
  const mux = new StreamMux(send);

  // The reader: the port's reads end while no host is on the other end; then its streams are gone,
  // and a new reader starts soon, then less often (an idle guest stays idle).
  let idle = 0;
  const startReader = () => {
    const r = spawn('cat', [], { stdio: [fd, 'pipe', 'ignore'] });
    let got = false;
    r.stdout!.on('data', (chunk: Buffer) => {
      got = true;
      idle = 0;
      try {
        mux.feed(chunk);
      } catch (e) {
        log((e as Error).message);
        mux.closeAll({ error: 'protocol', message: (e as Error).message });
      }
    });
    r.on('error', (err) => log(`reader: ${err.message}`));
    r.on('close', () => {
      // Its streams are over; a host still there (the reader failed, not the host) hears so.
      mux.abortAll({ error: 'host_gone', message: "the guest lost the host's side of the data port" });
      mux.closeAll({ error: 'host_gone', message: 'the host closed the data port' });
      // What was queued for that host is not written for the next.
      generation++;
      drop();
      idle = got ? 10 : Math.min(idle ? idle * 2 : 10, 1000);
      setTimeout(startReader, idle);
    });
  };
  startReader();

  return {
    mux,
    sync: (token: string) => {
      // A host that connects asks for this first: whatever an earlier host left half-written comes
      // before the marker, and the host reads on from the marker.
      drop();
      send(syncMarker(token));
    },
    writeRaw: async (bytes: number) => {
      const zeros = Buffer.alloc(Math.min(bytes, 256 * 1024));
      for (let left = bytes; left > 0; left -= zeros.length) {
        send(zeros.subarray(0, Math.min(left, zeros.length)));
        // Keep a few batches' worth queued, no more.
        if (queue.length > 8) await new Promise<void>((r) => drained.push(r));
      }
      await new Promise<void>((r) => (drained.push(r), flush()));
    },
  };
}

let rawSinking: Promise<void> | null = null;

/** The benchmark's bare channel, inward: the next `bytes` bytes on the port are counted, not parsed. */
export async function rawSink(bytes: number): Promise<{ ready: true }> {
  const { mux } = await dataPort();
  rawSinking = mux.expectRaw(bytes);
  return { ready: true };
}

/** Resolves once the bytes of the last rawSink have all come. */
export async function rawSinkDone(): Promise<{ done: true }> {
  await rawSinking;
  rawSinking = null;
  return { done: true };
}

/** The benchmark's bare channel, outward: `bytes` bytes of zeros straight onto the port. */
export async function rawSource(bytes: number): Promise<{ sent: number }> {
  await (await dataPort()).writeRaw(bytes);
  return { sent: bytes };
}

/** `data_sync`: the marker a newly connected host reads on from. */
export async function dataSync(token: string): Promise<{ synced: true }> {
  if (!/^[0-9a-f]{32}$/.test(token)) throw new Error('token must be 32 hex digits');
  (await dataPort()).sync(token);
  return { synced: true };
}
