/**
 * The gateway's HTTP pieces that need none of its state: where a brokered request may go, the headers
 * passed to the next hop, the one-line refusals, and the idle close of a connection.
 */
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';

const HOP_BY_HOP = ['connection', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'keep-alive', 'te', 'trailer', 'upgrade', 'host'];

/**
 * The URL a brokered request goes to: the provider URL's origin and path prefix, then `rest`; null when
 * `rest` could leave them (`//host`, a backslash, a `.` or `..` segment, or an encoded slash, backslash
 * or dot in the path). Gemini's query-string key is dropped: the real one goes in a header.
 */
export function brokeredTarget(base: URL, rest: string): URL | null {
  const q = rest.indexOf('?');
  const path = q < 0 ? rest : rest.slice(0, q);
  if (!path.startsWith('/') || path.startsWith('//') || path.includes('\\') || /%(2e|2f|5c)/i.test(path)) return null;
  if (path.split('/').some((seg) => seg === '.' || seg === '..')) return null;
  const prefix = base.pathname.replace(/\/+$/, '');
  const url = new URL(`${base.origin}${prefix}${rest}`);
  if (url.origin !== base.origin || !url.pathname.startsWith(`${prefix}/`)) return null;
  url.searchParams.delete('key');
  return url;
}

/** Closes a connection that moves no byte either way for `ms` (a socket's timeout counts reads and writes). */
export function closeWhenIdle(socket: Duplex, ms: number): void {
  if (socket instanceof net.Socket) return void socket.setTimeout(ms, () => socket.destroy());
  const timer = setTimeout(() => socket.destroy(), ms).unref();
  const touch = () => timer.refresh();
  socket.on('data', touch);
  const write = socket.write.bind(socket);
  socket.write = ((...args: Parameters<Duplex['write']>) => (touch(), write(...args))) as Duplex['write'];
  socket.once('close', () => clearTimeout(timer));
}

export function withoutHopByHop(h: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = { ...h };
  for (const name of HOP_BY_HOP) delete headers[name];
  return headers;
}

/** A request's headers for the next hop, to `host`. */
export function forwardHeaders(req: http.IncomingMessage, host: string): http.OutgoingHttpHeaders {
  return { ...withoutHopByHop(req.headers), host };
}

/** What a guest is told of a refused target: the policy's line, or why the target could not be reached. */
export function refusalText(host: string, t: { status: number; reason: string }): string {
  return t.status === 403 ? `agentvm egress policy denies ${host}` : `agentvm egress: ${host}: ${t.reason}`;
}

/** A one-line text answer, and the connection closes (a refusal is never a hang). */
export function refuse(res: http.ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close', 'content-length': Buffer.byteLength(text) + 1 });
  res.end(`${text}\n`);
}

export function refuseSocket(socket: Duplex, status: number, text: string): void {
  if (!socket.writable) return void socket.destroy();
  const body = `${text}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
