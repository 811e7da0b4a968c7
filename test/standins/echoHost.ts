import { createServer, type ServerResponse } from 'node:http';
import { listen } from './http.ts';

/** An ordinary web host on loopback: something a VM is allowed to reach, and a source of bytes to time. */
export interface EchoHost {
  url: string;
  name: string;
  /** Every request it answered, in order. */
  seen: { method: string; path: string }[];
  close(): Promise<void>;
}

const CHUNK = Buffer.alloc(64 * 1024, 0x61);
const MAX_BYTES = 64 * 1024 ** 3;

/** Serves `GET /` → `hello from <name>` and `GET /bytes?n=N` → N bytes, streamed in 64 KiB chunks. */
export async function startEchoHost(opts: { name?: string } = {}): Promise<EchoHost> {
  const name = opts.name ?? 'echo-host';
  const seen: EchoHost['seen'] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://echo');
    seen.push({ method: req.method ?? 'GET', path: url.pathname });
    const readable = req.method === 'GET' || req.method === 'HEAD';
    if (readable && url.pathname === '/') return sendText(res, 200, `hello from ${name}`);
    if (readable && url.pathname === '/bytes') {
      const raw = url.searchParams.get('n');
      const n = raw ? Number(raw) : Number.NaN;
      if (!Number.isSafeInteger(n) || n < 0 || n > MAX_BYTES) return sendText(res, 400, 'n: a whole number of bytes, at most 64 GiB');
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
      if (req.method === 'HEAD') return res.end();
      void streamBytes(res, n);
      return;
    }
    sendText(res, 404, 'not found');
  });
  const running = await listen(server);
  return { url: running.url, name, seen, close: running.close };
}

function sendText(res: ServerResponse, status: number, text: string) {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function streamBytes(res: ServerResponse, n: number) {
  let left = n;
  while (left > 0 && !res.destroyed) {
    const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
    left -= chunk.length;
    // Waits for the client to drain, so a slow reader does not buffer gigabytes here.
    if (!res.write(chunk)) await drainedOrClosed(res);
  }
  res.end();
}

function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
