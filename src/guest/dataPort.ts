/**
 * The guest's end of the data port, opened once, here. A `cat` reads the port into a pipe that Node
 * reads evented, in whatever sizes have gathered: reading the port itself would cost a thread-pool
 * round for each page it hands out (4 KiB), which halves what comes in. Writes go straight to the
 * port, one at a time (measured: through a second `cat` they went slower). A host that goes away
 * (the port's reads end) cuts every stream. Node built-ins only: bundled into the guest agent.
 */
import { spawn } from 'node:child_process';
import { promises as fsp, openSync, write } from 'node:fs';
import path from 'node:path';
import { DATA_PORT_NAME } from './protocol.ts';
import { StreamMux, syncMarker } from './streams.ts';

/** Frames queued while a port write is under way go down together, up to this much (the kernel takes 32 KiB a write: the writer loops). */
const COALESCE_BYTES = 256 * 1024;

async function findPort(name: string): Promise<string> {
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

function serve(device: string): DataPort {
  const fd = openSync(device, 'r+');
  // The writer: one write on the port at a time, in order (writes of one descriptor from the thread
  // pool could land out of order); frames queued meanwhile go down together.
  const queue: Buffer[] = [];
  let writing = false;
  /** Counts the hosts: what was queued for one that went is not written for the next. */
  let generation = 0;
  const drained: (() => void)[] = [];
  const flush = () => {
    if (writing) return;
    if (queue.length === 0) {
      for (const w of drained.splice(0)) w();
      return;
    }
    writing = true;
    let batch = queue.shift()!;
    if (queue.length && batch.length < COALESCE_BYTES) {
      const parts = [batch];
      let n = batch.length;
      while (queue.length && n < COALESCE_BYTES) n += (parts.push(queue.shift()!), parts[parts.length - 1].length);
      batch = Buffer.concat(parts, n);
    }
    const gen = generation;
    const writeAll = (buf: Buffer) =>
      write(fd, buf, 0, buf.length, null, (err, n) => {
        if (err?.code === 'EAGAIN') return setTimeout(() => writeAll(buf), 5);
        if (err) queue.length = 0; // no host on the port: what was queued is lost with its streams
        // The rest of a batch for a host that has gone since is dropped (the next host syncs past it).
        else if (n < buf.length && gen === generation) return writeAll(buf.subarray(n));
        writing = false;
        flush();
      });
    writeAll(batch);
  };
  const send = (bytes: Buffer) => {
    queue.push(bytes);
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
      queue.length = 0;
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
      queue.length = 0;
      send(syncMarker(token));
    },
    writeRaw: async (bytes: number) => {
      const zeros = Buffer.alloc(Math.min(bytes, COALESCE_BYTES));
      for (let left = bytes; left > 0; left -= zeros.length) {
        send(zeros.subarray(0, Math.min(left, zeros.length)));
        // Keep a few writes queued, no more.
        if (queue.length > 4) await new Promise<void>((r) => drained.push(r));
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
