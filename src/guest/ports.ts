/**
 * The guest's TCP ports for previews: what listens (read from /proc, no process started), and a
 * connection to one of them on the guest's loopback carried as a stream on the data port, the way
 * the egress gateway's connections go the other way (egress.ts). The host opens the stream and asks
 * `port_connect`; the bytes flow once the answer says the connection is made. Node built-ins only:
 * bundled into the guest agent.
 */
import net from 'node:net';
import { promises as fsp } from 'node:fs';
import { dataPort } from './dataPort.ts';
import { FramedReads, splice } from './egress.ts';
import { EGRESS_GATEWAY_PORT } from '../wire/protocol.ts';
import { MAX_WINDOW, MIN_WINDOW, STREAM_WINDOW } from '../wire/frames.ts';

/** Ports a preview may reach: 1024–65535, and 80 and 443. */
export function previewablePort(port: number): boolean {
  return Number.isInteger(port) && ((port >= 1024 && port <= 65535) || port === 80 || port === 443);
}

export interface PortConnectArgs {
  stream: number;
  port: number;
  window?: number;
}

/** How long a connection to the guest's loopback may take (it is local: only a stuck guest is slower). */
const CONNECT_MS = 10_000;

function connectTo(host: string, port: number, reads: FramedReads): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host, port, allowHalfOpen: true, onread: reads.onread });
    const timer = setTimeout(() => (sock.destroy(), reject(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' }))), CONNECT_MS);
    sock.once('connect', () => (clearTimeout(timer), sock.removeAllListeners('error'), sock.on('error', () => undefined), resolve(sock)));
    sock.once('error', (err) => (clearTimeout(timer), reject(err)));
  });
}

/**
 * `port_connect`: a connection to `port` on the guest's loopback (IPv4, else IPv6), joined to the
 * host's stream. Nothing listening: `{connected: false}` (the host answers port_closed).
 */
export async function portConnect(args: PortConnectArgs): Promise<{ connected: boolean; error?: string }> {
  const window = args?.window ?? STREAM_WINDOW;
  if (!Number.isInteger(args?.stream) || args.stream <= 0 || !Number.isInteger(window) || window < MIN_WINDOW || window > MAX_WINDOW) {
    throw new Error('port_connect needs a stream id and a valid window');
  }
  if (!previewablePort(args.port) || args.port === EGRESS_GATEWAY_PORT) throw new Error(`port ${args.port} is not one a preview may reach`);
  const { mux } = await dataPort();
  if (mux.has(args.stream)) throw new Error(`stream ${args.stream} is in use`);
  const stream = mux.open(args.stream, window);
  const reads = new FramedReads(stream);
  let sock: net.Socket;
  try {
    sock = await connectTo('127.0.0.1', args.port, reads);
  } catch (err4) {
    try {
      sock = await connectTo('::1', args.port, reads);
    } catch {
      stream.release();
      return { connected: false, error: (err4 as NodeJS.ErrnoException).code ?? 'ECONNREFUSED' };
    }
  }
  // The host gave up meanwhile (it cut the stream): nothing to join.
  if (stream.closed) {
    sock.destroy();
    return { connected: false, error: 'cancelled' };
  }
  sock.setNoDelay(true);
  splice(sock, stream, reads);
  return { connected: true };
}

export interface ListeningPort {
  port: number;
  process: string | null;
}

/** The inodes of listening sockets in one of /proc/net/tcp{,6}, by port, on an address the loopback reaches. */
export function parseListening(table: string, into: Map<number, Set<string>>): void {
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== '0A') continue; // 0A: LISTEN
    const [addr, portHex] = f[1].split(':');
    // Only what the loopback reaches: any address, or the loopback's own.
    const any = /^0+$/.test(addr);
    const loop4 = addr === '0100007F';
    const loop6 = addr === '00000000000000000000000001000000' || addr === '0000000000000000FFFF00000100007F';
    if (!any && !loop4 && !loop6) continue;
    const port = parseInt(portHex, 16);
    if (!previewablePort(port) || port === EGRESS_GATEWAY_PORT) continue;
    const inodes = into.get(port) ?? new Set<string>();
    inodes.add(f[9]);
    into.set(port, inodes);
  }
}

/** `ports_list`: the TCP ports listening now, each with the name of a process that holds it. */
export async function listPorts(): Promise<{ ports: ListeningPort[] }> {
  const byPort = new Map<number, Set<string>>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) parseListening(await fsp.readFile(file, 'utf8').catch(() => ''), byPort);
  const owner = new Map<string, string>();
  if (byPort.size) {
    const wanted = new Set([...byPort.values()].flatMap((s) => [...s]));
    for (const pid of await fsp.readdir('/proc').catch(() => [] as string[])) {
      if (!/^\d+$/.test(pid) || wanted.size === owner.size) continue;
      const fds = await fsp.readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
      for (const fd of fds) {
        const link = await fsp.readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
        const m = /^socket:\[(\d+)\]$/.exec(link);
        if (m && wanted.has(m[1]) && !owner.has(m[1])) {
          const comm = (await fsp.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
          owner.set(m[1], comm || `pid ${pid}`);
        }
      }
    }
  }
  const ports = [...byPort.entries()]
    .sort(([a], [b]) => a - b)
    .map(([port, inodes]) => ({ port, process: [...inodes].map((i) => owner.get(i)).find(Boolean) ?? null }));
  return { ports };
}
