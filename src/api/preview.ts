/**
 * Preview routing on the API server (decisions section 16), ahead of the API's router: a request whose
 * Host is `{port}-{vm label}.{AGENTVM_PREVIEW_DOMAIN}`, or that carries `X-Agentvm-Vm` and
 * `X-Agentvm-Port`, is the VM's, and goes to that port in the guest over the VM's data channel. Node's
 * HTTP client runs on the guest stream as its socket, so chunked bodies and server-sent events pass
 * as they come; an upgrade (WebSocket) is written to the guest as it came and the two sockets are
 * joined, so the app's own answer to it, a refusal too, reaches the client.
 *
 * Private by default (see PreviewService.allowed). The routing headers, an API key, the preview token
 * and its cookie never reach the app.
 */
import http, { type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { DomainError } from '../domain/errors.ts';
import { statusOf } from '../http/errors.ts';
import { checkedPort, hostForApp, routeFromHost, type PreviewCredentials, type PreviewRoute, type PreviewService, type PreviewTarget } from '../domain/previews.ts';
import { looksLikeApiKey } from '../domain/keys.ts';
import type { Logger } from '../log.ts';
import type { FailureThrottle } from '../throttle.ts';

export const VM_HEADER = 'x-agentvm-vm';
export const PORT_HEADER = 'x-agentvm-port';
export const TOKEN_HEADER = 'x-agentvm-preview-token';
/** The same token under E2B's name (its SDKs' `trafficAccessToken`, section 17). */
export const E2B_TOKEN_HEADER = 'e2b-traffic-access-token';
export const TOKEN_QUERY = 'agentvm_token';
export const TOKEN_COOKIE = 'agentvm_preview_token';

/** Hop-by-hop headers: each connection's own, never passed on. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** The preview domain: AGENTVM_PREVIEW_DOMAIN, else `localhost:<API port>` (`*.localhost` is loopback in browsers). */
export function previewSite(apiPort: number): { domain: string; scheme: 'http' | 'https' } {
  const domain = (process.env.AGENTVM_PREVIEW_DOMAIN ?? '').trim() || `localhost:${apiPort}`;
  const scheme = process.env.AGENTVM_PREVIEW_SCHEME === 'https' || (!domain.startsWith('localhost') && process.env.AGENTVM_PREVIEW_SCHEME !== 'http') ? 'https' : 'http';
  return { domain, scheme };
}

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** What a request names, or null when it is the API's. Throws 400 for a malformed preview route. */
export function previewRoute(req: IncomingMessage, domain: string): PreviewRoute | null {
  const vm = one(req.headers[VM_HEADER]);
  const port = one(req.headers[PORT_HEADER]);
  if (vm !== undefined || port !== undefined) {
    if (!vm) throw new DomainError('invalid_request', `${VM_HEADER}: give the VM's id with ${PORT_HEADER}`);
    return { vmId: vm.trim(), port: checkedPort((port ?? '').trim(), 'X-Agentvm-Port') };
  }
  return routeFromHost(one(req.headers.host), domain);
}

function cookieToken(header: string | undefined): string | null {
  for (const part of (header ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === TOKEN_COOKIE) return v.join('=') || null;
  }
  return null;
}

export function credentials(req: IncomingMessage): PreviewCredentials {
  const m = /^Bearer +(\S+) *$/i.exec(one(req.headers.authorization) ?? '');
  const header = one(req.headers[TOKEN_HEADER])?.trim() || one(req.headers[E2B_TOKEN_HEADER])?.trim();
  return { bearer: m ? m[1] : null, token: header || cookieToken(req.headers.cookie) };
}

/**
 * The request's headers as the app gets them: no routing headers, no credential of ours, no hop-by-hop;
 * the Host the VM's previews set in place of the client's, when they set one.
 */
export function forwardHeaders(req: IncomingMessage, keepUpgrade: boolean, host: string | null = null): [string, string][] {
  const out: [string, string][] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const lower = name.toLowerCase();
    let value = raw[i + 1];
    if (lower === VM_HEADER || lower === PORT_HEADER || lower === TOKEN_HEADER || lower === E2B_TOKEN_HEADER) continue;
    // An API key of ours (either format) never reaches the app; an app's own Bearer does.
    if (lower === 'authorization' && looksLikeApiKey(/^Bearer +(\S+) *$/i.exec(value)?.[1] ?? '')) continue;
    if (HOP.has(lower) && !(keepUpgrade && (lower === 'connection' || lower === 'upgrade'))) continue;
    if (lower === 'host' && host !== null) continue;
    if (lower === 'cookie') {
      value = value.split(';').map((p) => p.trim()).filter((p) => p && !p.startsWith(`${TOKEN_COOKIE}=`)).join('; ');
      if (!value) continue;
    }
    out.push([name, value]);
  }
  if (host !== null) out.unshift(['Host', host]);
  return out;
}

/** The request's path without `agentvm_token`. */
function withoutToken(url: string): string {
  const u = new URL(url, 'http://x');
  u.searchParams.delete(TOKEN_QUERY);
  return u.pathname + u.search;
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A refusal as the Error shape in JSON, or a short HTML page when the client asks for HTML. */
export function refusal(err: DomainError, accept: string | undefined, requestId: string): { status: number; headers: Record<string, string>; body: string } {
  const html = /text\/html/i.test(accept ?? '') && !/application\/json/i.test(accept ?? '');
  const shape: { error: string; message: string; hint?: string } = { error: err.code, message: err.message };
  if (err.hint) shape.hint = err.hint;
  const body = html
    ? `<!doctype html><html><head><meta charset="utf-8"><title>${statusOf(err)} ${err.code}</title></head>` +
      `<body><h1>${statusOf(err)} ${escapeHtml(err.code)}</h1>${err.message ? `<p>${escapeHtml(err.message)}</p>` : ''}${err.hint ? `<p>${escapeHtml(err.hint)}</p>` : ''}</body></html>\n`
    : JSON.stringify(shape);
  return {
    status: statusOf(err),
    headers: {
      'Content-Type': html ? 'text/html; charset=utf-8' : 'application/json',
      'Content-Length': String(Buffer.byteLength(body)),
      'Cache-Control': 'no-store',
      'X-Request-Id': requestId,
      ...(err.headers ?? {}),
    },
    body,
  };
}

const asApiError = (err: unknown): DomainError => (err instanceof DomainError ? err : new DomainError('internal', ''));

/**
 * Takes preview requests and upgrades off `server` before its other listeners (the API's app, the
 * shell sockets) see them; everything else goes to them as before.
 */
export function servePreviews(server: Server, previews: PreviewService, throttle: FailureThrottle, log: Logger): void {
  const onRequest = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  const onUpgrade = server.listeners('upgrade') as ((req: IncomingMessage, socket: Duplex, head: Buffer) => void)[];
  server.removeAllListeners('request');
  server.removeAllListeners('upgrade');

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const requestId = `req_pv_${randomBytes(8).toString('hex')}`;
    let route: PreviewRoute | null;
    try {
      route = previewRoute(req, previews.site.domain);
    } catch (err) {
      return answer(res, asApiError(err), req, requestId);
    }
    if (!route) return onRequest.forEach((l) => l.call(server, req, res));
    proxy(req, res, route, requestId).catch((err: unknown) => {
      if (!(err instanceof DomainError)) log.error({ err: (err as Error).message, request_id: requestId }, 'preview request failed');
      if (!res.headersSent) answer(res, asApiError(err), req, requestId);
      else res.destroy();
    });
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const requestId = `req_pv_${randomBytes(8).toString('hex')}`;
    socket.on('error', () => undefined);
    let route: PreviewRoute | null;
    try {
      route = previewRoute(req, previews.site.domain);
    } catch (err) {
      return refuseSocket(socket, asApiError(err), req, requestId);
    }
    if (!route) return onUpgrade.forEach((l) => l.call(server, req, socket, head));
    upgrade(req, socket, head, route).catch((err: unknown) => {
      if (!(err instanceof DomainError)) log.error({ err: (err as Error).message, request_id: requestId }, 'preview upgrade failed');
      refuseSocket(socket, asApiError(err), req, requestId);
    });
  });

  /**
   * A refusal; a 401 to a request that brought our cookie also clears it: its token was rotated (each
   * `vms url` and `vms open` makes a new one), and a browser that kept sending it (a page's hot-reload
   * polling) would count a failure against its address each time.
   */
  function refusalFor(err: DomainError, req: IncomingMessage, requestId: string) {
    const r = refusal(err, one(req.headers.accept), requestId);
    if (err.code === 'unauthorized' && cookieToken(req.headers.cookie) !== null) {
      const secure = previews.site.scheme === 'https' ? '; Secure' : '';
      r.headers['Set-Cookie'] = `${TOKEN_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax${secure}`;
    }
    return r;
  }

  function answer(res: ServerResponse, err: DomainError, req: IncomingMessage, requestId: string): void {
    const r = refusalFor(err, req, requestId);
    res.writeHead(r.status, r.headers).end(r.body);
  }

  function refuseSocket(socket: Duplex, err: DomainError, req: IncomingMessage, requestId: string): void {
    if (socket.destroyed) return;
    const r = refusalFor(err, req, requestId);
    const lines = Object.entries({ ...r.headers, Connection: 'close' }).map(([k, v]) => `${k}: ${v}`);
    socket.end(`HTTP/1.1 ${r.status} ${http.STATUS_CODES[r.status]}\r\n${lines.join('\r\n')}\r\n\r\n${r.body}`);
  }

  /** The VM and a connection to its port, once the request may have them. */
  async function open(req: IncomingMessage, route: PreviewRoute, queryToken: string | null, signal?: AbortSignal): Promise<{ target: PreviewTarget; socket: Duplex }> {
    const target = await previews.target(route);
    const creds = credentials(req);
    if (queryToken) creds.token = queryToken;
    await previews.admit(target, route.port, creds, throttle, throttle.addressOf(req));
    const wait = await previews.running(target, signal);
    return { target, socket: await previews.connect(target, route.port, wait) };
  }

  async function proxy(req: IncomingMessage, res: ServerResponse, route: PreviewRoute, requestId: string): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const queryToken = url.searchParams.get(TOKEN_QUERY);
    const gone = new AbortController();
    res.once('close', () => gone.abort());
    if (queryToken !== null && 'label' in route) {
      // `?agentvm_token=`: a cookie for this one host, then the same address without the token.
      const target = await previews.target(route);
      await previews.admitQueryToken(target, queryToken, throttle, throttle.addressOf(req));
      const secure = previews.site.scheme === 'https' ? '; Secure' : '';
      res.writeHead(302, {
        Location: withoutToken(req.url ?? '/'),
        'Set-Cookie': `${TOKEN_COOKIE}=${queryToken}; Path=/; HttpOnly; SameSite=Lax${secure}`,
        'Cache-Control': 'no-store',
        'X-Request-Id': requestId,
        'Content-Length': '0',
      });
      res.end();
      return;
    }
    const { socket, target } = await open(req, route, queryToken, gone.signal);
    if (gone.signal.aborted) return void socket.destroy();
    // As an array the headers are written as they are (Node adds `Connection: close`: one request a stream).
    const list = forwardHeaders(req, false, hostForApp(target, route.port));
    const up = http.request({
      method: req.method,
      path: queryToken !== null ? withoutToken(req.url ?? '/') : req.url,
      headers: list as unknown as OutgoingHttpHeaders,
      createConnection: () => socket as Socket,
      setHost: false,
    });
    up.on('response', (ur) => {
      const out: string[] = [];
      for (let i = 0; i < ur.rawHeaders.length; i += 2) {
        if (!HOP.has(ur.rawHeaders[i].toLowerCase())) out.push(ur.rawHeaders[i], ur.rawHeaders[i + 1]);
      }
      res.writeHead(ur.statusCode ?? 502, ur.statusMessage, out);
      // Headers now, not with the first bytes of the body: an event stream's client sees its start.
      res.flushHeaders();
      ur.pipe(res);
      // A long answer (an event stream) is activity for the idle stop while it flows, not only at its start.
      ur.on('data', () => previews.activity(target.vm_id));
      ur.on('error', () => res.destroy());
      ur.on('aborted', () => res.destroy());
    });
    up.on('error', () => {
      if (!res.headersSent) {
        answer(res, new DomainError('port_closed', `the app on port ${route.port} closed the connection without an answer`, 'see the app\'s log in the VM'), req, requestId);
      } else res.destroy();
      socket.destroy();
    });
    res.once('close', () => {
      if (!res.writableFinished) up.destroy();
      socket.destroy();
    });
    req.pipe(up);
  }

  async function upgrade(req: IncomingMessage, client: Duplex, head: Buffer, route: PreviewRoute): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const queryToken = url.searchParams.get(TOKEN_QUERY);
    const { socket, target } = await open(req, route, queryToken);
    if (client.destroyed) return void socket.destroy();
    const lines = forwardHeaders(req, true, hostForApp(target, route.port)).map(([k, v]) => `${k}: ${v}`);
    const path = queryToken !== null ? withoutToken(req.url ?? '/') : req.url ?? '/';
    socket.write(`${req.method} ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
    if (head.length) socket.write(head);
    socket.on('error', () => client.destroy());
    client.on('error', () => socket.destroy());
    client.once('close', () => socket.destroy());
    socket.once('close', () => client.destroy());
    socket.pipe(client);
    client.pipe(socket);
    // An open socket with traffic either way (hot reload, a notebook) is activity for the idle stop.
    const active = () => previews.activity(target.vm_id);
    socket.on('data', active);
    client.on('data', active);
  }
}
