/**
 * The guest's end of the data port: one descriptor, read in a loop, written by one sequential writer
 * (writes from the thread pool on one descriptor could otherwise land out of order). A host that goes
 * away cuts every stream. Node built-ins only: bundled into the guest agent.
 */
import { promises as fsp, openSync, read, write } from 'node:fs';
import path from 'node:path';
import { DATA_PORT_NAME } from './protocol.ts';
import { StreamMux } from './streams.ts';

/** Reads land in slabs: the frames' data is handed on as slices of them, without a copy. */
const SLAB_BYTES = 1024 * 1024;
const READ_BYTES = 64 * 1024;
/** A port write takes at most 32 KiB at a time (virtio_console): the writer loops. */
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
  /** Writes `bytes` bytes of zeros straight to the port, not as frames (the benchmark's bare channel). */
  writeRaw(bytes: number): Promise<void>;
}

let port: Promise<DataPort> | null = null;

/** The data port, opened once on first use (the agent starts it when it starts). */
export function dataPort(): Promise<DataPort> {
  port ??= findPort(DATA_PORT_NAME).then(serve);
  return port;
}

function serve(device: string): DataPort {
  const fd = openSync(device, 'r+');
  const queue: Buffer[] = [];
  let writing = false;
  const flush = () => {
    if (writing || queue.length === 0) return;
    writing = true;
    // Small frames queued together go out in one write.
    let batch = queue.shift()!;
    while (queue.length && batch.length < COALESCE_BYTES) batch = Buffer.concat([batch, queue.shift()!]);
    const writeAll = (buf: Buffer, done: () => void) =>
      write(fd, buf, 0, buf.length, null, (err, n) => {
        if (err) {
          if (err.code === 'EAGAIN') return setTimeout(() => writeAll(buf, done), 5);
          // No host on the port: what was queued is lost with the streams it belonged to.
          queue.length = 0;
          return done();
        }
        if (n < buf.length) return writeAll(buf.subarray(n), done);
        done();
      });
    writeAll(batch, () => {
      writing = false;
      flush();
    });
  };
  const send = (bytes: Buffer) => {
    queue.push(bytes);
    flush();
  };
  const mux = new StreamMux(send);

  let slab = Buffer.allocUnsafe(SLAB_BYTES);
  let used = 0;
  let idle = 0;
  let hostThere = false;
  const readMore = () => {
    if (SLAB_BYTES - used < READ_BYTES) {
      slab = Buffer.allocUnsafe(SLAB_BYTES);
      used = 0;
    }
    read(fd, slab, used, READ_BYTES, null, (err, n) => {
      if (err && err.code !== 'EAGAIN') {
        process.stderr.write(`agentvm-agent: data port: ${err.message}\n`);
        return setTimeout(readMore, 250);
      }
      if (!n) {
        // No host on the other end: its streams are gone. Look again soon, then less often.
        if (hostThere) mux.closeAll({ error: 'host_gone', message: 'the host closed the data port' });
        hostThere = false;
        idle = Math.min(idle ? idle * 2 : 10, 250);
        return setTimeout(readMore, idle);
      }
      hostThere = true;
      idle = 0;
      const chunk = slab.subarray(used, used + n);
      used += n;
      try {
        mux.feed(chunk);
      } catch (e) {
        process.stderr.write(`agentvm-agent: data port: ${(e as Error).message}\n`);
        mux.closeAll({ error: 'protocol', message: (e as Error).message });
      }
      readMore();
    });
  };
  readMore();

  return {
    mux,
    writeRaw: async (bytes: number) => {
      const zeros = Buffer.alloc(Math.min(bytes, COALESCE_BYTES));
      let left = bytes;
      while (left > 0) {
        const n = Math.min(left, zeros.length);
        await new Promise<void>((resolve) => {
          queue.push(zeros.subarray(0, n));
          flush();
          // Resolve when the queue has drained far enough: at most a few writes ahead.
          const wait = () => (queue.length < 4 ? resolve() : setTimeout(wait, 1));
          wait();
        });
        left -= n;
      }
      await new Promise<void>((resolve) => {
        const wait = () => (queue.length === 0 && !writing ? resolve() : setTimeout(wait, 1));
        wait();
      });
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
