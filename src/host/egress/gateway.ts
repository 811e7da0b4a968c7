/**
 * The egress gateway of a VM host: a VM's only way off its machine. A VM has no network card: each
 * connection a guest program opens to the gateway's address is carried on the VM's data port and
 * handed here as a connection of that VM (accept; src/vmm/egress.ts), so the gateway always knows which
 * VM speaks and a guest reaches nothing else: not the host's loopback, not another VM.
 *
 * On each connection it is an HTTP proxy: CONNECT (HTTPS and any TCP) and absolute-form HTTP requests are
 * judged by the VM's policy, read from the database on every connection (a change through any
 * replica applies to the next connection), and then by the address the name resolves to at connect
 * time and again on the address the connection reached (net/denyList.ts; names the operator pins
 * with AGENTVM_EGRESS_HOSTS are exempt). Requests to `/providers/<id>/…` on the gateway itself are
 * brokered: allowed while the policy allows the provider's public API host, forwarded to the operator's
 * provider URL (trusted, never reached any other way) with the VM's real key, which never enters the
 * guest, and never anywhere else. A refusal is an immediate 403 with a one-line body.
 * Each VM has at most GATEWAY_LIMITS open and new connections (connectionLimits.ts); an idle one is closed.
 * Every connection is logged (host, port, decision, reason, bytes), never a body, header or key.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import dns from 'node:dns/promises';
import { rm } from 'node:fs/promises';
import type { Duplex } from 'node:stream';
import type { Db } from '../../store/db.ts';
import type { Logger } from '../../log.ts';
import * as egressStore from '../../store/egress.ts';
import * as vmStore from '../../store/vms.ts';
import { canonicalHost, decideName, type Decision, type EgressPolicy } from '../../domain/egress.ts';
import { BROKERED_METHODS, BROKERS, brokerById, publicHost, type ProviderUrls } from '../../harness/providers.ts';
import { EGRESS_GATEWAY_NAME } from '../../wire/protocol.ts';
import { BROKERED_PATH } from '../../harness/invoke.ts';
import { DenyList } from '../../net/denyList.ts';
import type { HostCredentials } from './credentials.ts';
import { ConnectionLimits, GATEWAY_LIMITS, type GatewayLimits } from './connectionLimits.ts';
import { brokeredTarget, closeWhenIdle, forwardHeaders, refusalText, refuse, refuseSocket, withoutHopByHop } from './wire.ts';

export const LOG_KEEP_MS = 7 * 24 * 3600_000;
const CONNECT_TIMEOUT_MS = 10_000;
const RESOLVE_TIMEOUT_MS = 5_000;

export interface GatewayDeps {
  db: Db;
  credentials: HostCredentials;
  providerUrls: ProviderUrls;
  pins: Map<string, string>;
  log: Logger;
  /** GATEWAY_LIMITS unless given (tests shorten them). */
  limits?: Partial<GatewayLimits>;
  /** Milliseconds since the epoch, for the per-second count (Date.now unless given). */
  now?: () => number;
}

/** Where a connection may go: an address, or why not. */
/** Where a connection goes, and why (the policy's reason, as the egress log keeps it), or why not. */
type Target = { ok: true; address: string; reason: string } | { ok: false; status: 403 | 502; reason: string };

/** One logged connection: its row, and the bytes it moved. */
class Tally {
  out = 0;
  in = 0;
  constructor(readonly id: Promise<number | null>) {}
}

export class EgressGateway {
  private readonly http: http.Server;
  private readonly listeners = new Map<string, net.Server>();
  private readonly vmOf = new WeakMap<object, string>();
  private readonly open = new Set<Duplex>();
  private readonly deny = new DenyList();
  private readonly prune: NodeJS.Timeout;
  private readonly connections: ConnectionLimits;
  private readonly fixedPolicies = new Map<string, EgressPolicy>();
  /** Hosts of the operator's provider URLs that are not the public APIs: reached only through the brokered path. */
  private readonly brokeredOnly: Set<string>;
  private closed = false;

  constructor(private readonly d: GatewayDeps) {
    this.connections = new ConnectionLimits({ ...GATEWAY_LIMITS, ...d.limits }, d.now);
    this.brokeredOnly = new Set(BROKERS.filter((b) => d.providerUrls[b.id] !== b.defaultUrl).map((b) => canonicalHost(new URL(d.providerUrls[b.id]).hostname)));
    this.http = http.createServer({ keepAlive: true });
    this.http.on('request', (req, res) => void this.onRequest(req, res).catch((err) => this.fail(res, err)));
    this.http.on('connect', (req, socket: Duplex, head: Buffer) => void this.onConnect(req, socket, head).catch((err) => this.failSocket(socket, err)));
    this.http.on('clientError', (_err, socket) => socket.destroy());
    this.prune = setInterval(() => void this.pruneLog(), 3600_000).unref();
  }

  /** Listens on a VM's socket (QEMU's forward connects there); again after a restart re-adopts the VM. */
  async attach(vmId: string, socketPath: string): Promise<void> {
    if (this.closed || this.listeners.has(vmId)) return;
    const server = net.createServer((socket) => this.accept(vmId, socket));
    this.listeners.set(vmId, server);
    // A socket file an earlier process left (it went without closing): listening needs the path free.
    await rm(socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    }).catch((err) => {
      this.listeners.delete(vmId);
      throw err;
    });
  }

  /**
   * One connection from a VM's guest, however it arrived (the VM is known from where it arrived, never
   * from what the guest says): admitted within the VM's limits, or answered 429 and closed.
   */
  accept(vmId: string, socket: Duplex): void {
    const admitted = this.closed ? { refusal: 'the gateway is closing' } : this.connections.admit(vmId);
    if ('refusal' in admitted) {
      socket.on('error', () => undefined);
      return refuseSocket(socket, 429, `agentvm egress: ${admitted.refusal}`);
    }
    socket.once('close', admitted.release);
    this.vmOf.set(socket, vmId);
    this.track(socket);
    closeWhenIdle(socket, this.connections.limits.idleMs);
    this.http.emit('connection', socket);
  }

  /**
   * A policy for a machine that is not a tenant's VM row (an image's builder VM): used in place of the
   * database's until cleared with null.
   */
  setPolicy(vmId: string, policy: EgressPolicy | null): void {
    if (policy) this.fixedPolicies.set(vmId, policy);
    else this.fixedPolicies.delete(vmId);
  }

  /** The VM's policy, read on every connection: a change through any replica applies to the next one. */
  private async policyOf(vmId: string): Promise<EgressPolicy | null> {
    return this.fixedPolicies.get(vmId) ?? vmStore.egressOf(this.d.db, vmId);
  }

  /** The VM is gone: its socket closes, and so do its open connections. */
  detach(vmId: string): void {
    const server = this.listeners.get(vmId);
    if (!server) return;
    this.listeners.delete(vmId);
    this.connections.forget(vmId);
    server.close();
    for (const s of this.open) if (this.vmOf.get(s) === vmId) s.destroy();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.prune);
    for (const vmId of [...this.listeners.keys()]) this.detach(vmId);
    for (const s of this.open) s.destroy();
    this.http.closeAllConnections();
  }

  private track(s: Duplex): void {
    this.open.add(s);
    s.once('close', () => this.open.delete(s));
  }

  async pruneLog(): Promise<void> {
    await egressStore.pruneLog(this.d.db, new Date(Date.now() - LOG_KEEP_MS)).catch((err) => this.d.log.warn({ err }, 'pruning the egress log failed'));
  }

  // ---- decisions ----

  /** The policy's decision on a name, then the address it resolves to now. */
  private async target(vmId: string, host: string, policy: EgressPolicy | null): Promise<Target> {
    if (!policy) return { ok: false, status: 403, reason: 'the VM is gone' };
    const decision: Decision =
      host === EGRESS_GATEWAY_NAME
        ? { allowed: false, reason: 'the gateway itself' }
        : this.brokeredOnly.has(host)
          ? { allowed: false, reason: "the operator's provider URL, reached only through /providers/<provider>/" }
          : decideName(policy, host);
    if (!decision.allowed) return { ok: false, status: 403, reason: decision.reason };
    const t = await this.resolve(host);
    return t.ok ? { ...t, reason: decision.reason } : t;
  }

  /**
   * A pinned name's address, or the first address of the name (or literal) if none it has is denied;
   * `trusted` (the operator's provider URL): the first address, whatever it is.
   */
  private async resolve(host: string, trusted = false): Promise<Target> {
    const pinned = this.d.pins.get(host);
    if (pinned) return { ok: true, address: pinned, reason: 'pinned' };
    let addresses: string[];
    if (net.isIP(host)) addresses = [host];
    else {
      try {
        const found = await Promise.race([
          dns.lookup(host, { all: true, verbatim: true }),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out')), RESOLVE_TIMEOUT_MS).unref()),
        ]);
        addresses = found.map((a) => a.address);
      } catch (err) {
        return { ok: false, status: 502, reason: `cannot resolve: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
      }
    }
    for (const address of trusted ? [] : addresses) {
      const why = this.deny.reason(address);
      if (why) return { ok: false, status: 403, reason: `resolves to ${address} (${why})` };
    }
    if (addresses.length === 0) return { ok: false, status: 502, reason: 'cannot resolve: no address' };
    return { ok: true, address: addresses[0], reason: trusted ? 'the operator\'s provider URL' : 'resolved' };
  }

  private logged(vmId: string, host: string, port: number, allowed: boolean, reason: string): Tally {
    const id = egressStore
      .logConnection(this.d.db, vmId, { at: new Date(), host, port, decision: allowed ? 'allowed' : 'denied', reason })
      .catch((err) => {
        this.d.log.warn({ err, vm_id: vmId }, 'writing the egress log failed');
        return null;
      });
    return new Tally(id);
  }

  private finish(t: Tally): void {
    void t.id.then(async (id) => { if (id !== null) await egressStore.logBytes(this.d.db, id, t.out, t.in); }).catch(() => undefined);
  }

  // ---- CONNECT host:port ----

  private async onConnect(req: http.IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    const vmId = this.vmOf.get(req.socket)!;
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(req.url ?? '');
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) return refuseSocket(client, 400, 'agentvm egress: CONNECT needs host:port');
    const host = canonicalHost(m[1]);
    const port = Number(m[2]);
    const t = await this.target(vmId, host, await this.policyOf(vmId));
    const tally = this.logged(vmId, host, port, t.ok, t.reason);
    if (!t.ok) return (this.finish(tally), refuseSocket(client, t.status, refusalText(host, t)));
    const upstream = net.connect({ host: t.address, port, timeout: CONNECT_TIMEOUT_MS });
    this.track(upstream);
    upstream.once('timeout', () => upstream.destroy(new Error('connect timed out')));
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      const reached = this.reachedDenied(host, upstream);
      if (reached) return (upstream.destroy(), refuseSocket(client, 403, `agentvm egress policy denies ${host}`), this.d.log.warn({ vm_id: vmId, host, reached }, 'egress connection reached a denied address'));
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.once('error', (err) => {
      if (upstream.connecting || !client.writable) refuseSocket(client, 502, `agentvm egress: ${host}:${port}: ${err.message}`);
      else client.destroy();
    });
    client.once('error', () => upstream.destroy());
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => {
      client.end();
      // What went up (head and all the client sent after it) and came back, by the upstream socket's
      // own counts: no listener on each chunk of a busy tunnel.
      tally.out += upstream.bytesWritten;
      tally.in += upstream.bytesRead;
      this.finish(tally);
    });
  }

  // ---- HTTP: absolute-form through the proxy, or brokered ----

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const vmId = this.vmOf.get(req.socket)!;
    const raw = req.url ?? '/';
    const url = URL.canParse(raw, `http://${EGRESS_GATEWAY_NAME}`) ? new URL(raw, `http://${EGRESS_GATEWAY_NAME}`) : null;
    if (!url) return refuse(res, 400, 'agentvm egress: not a valid URL');
    const toGateway = raw.startsWith('/') || canonicalHost(url.hostname) === EGRESS_GATEWAY_NAME;
    if (toGateway) {
      // The path as the guest sent it, not as URL parsing normalised it: the broker judges every spelling.
      const rawPath = raw.startsWith('/') ? raw : raw.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '');
      const m = new RegExp(`^${BROKERED_PATH}/([a-z]+)(/[^?]*)?(\\?.*)?$`).exec(rawPath);
      if (!m) return refuse(res, 404, 'agentvm egress: not a proxy request (use this address as an HTTP proxy, or /providers/<provider>/)');
      return this.broker(req, res, vmId, m[1], `${m[2] ?? '/'}${m[3] ?? ''}`);
    }
    if (url.protocol !== 'http:') return refuse(res, 400, 'agentvm egress: only http:// URLs go through as requests; HTTPS uses CONNECT');
    const host = canonicalHost(url.hostname);
    const port = Number(url.port || 80);
    const t = await this.target(vmId, host, await this.policyOf(vmId));
    const tally = this.logged(vmId, host, port, t.ok, t.reason);
    if (!t.ok) return (this.finish(tally), refuse(res, t.status, refusalText(host, t)));
    this.forward(req, res, tally, { url, address: t.address, headers: forwardHeaders(req, url.host), checkReached: host });
  }

  /** Why the address a connection actually reached is denied (a pinned name's is not), or null. */
  private reachedDenied(host: string, socket: net.Socket): string | null {
    if (this.d.pins.has(host)) return null;
    return socket.remoteAddress ? this.deny.reason(socket.remoteAddress) : 'no remote address';
  }

  /** A provider's request with the VM's real key in place of the placeholder. */
  private async broker(req: http.IncomingMessage, res: http.ServerResponse, vmId: string, providerId: string, rest: string): Promise<void> {
    const broker = brokerById(providerId);
    if (!broker) return refuse(res, 404, `agentvm egress: no provider "${providerId}" is brokered (anthropic, openai, google)`);
    const base = new URL(this.d.providerUrls[broker.id]);
    const url = brokeredTarget(base, rest);
    const named = publicHost(broker);
    const host = canonicalHost(base.hostname);
    const port = Number(base.port || (base.protocol === 'https:' ? 443 : 80));
    const refused = (status: number, reason: string, text: string) => {
      this.finish(this.logged(vmId, named, port, false, reason));
      refuse(res, status, text);
    };
    if (!url) return refused(400, 'a path that leaves the provider URL', `agentvm egress: a brokered path may not hold //, \\, .. or an encoded form of them`);
    if (!BROKERED_METHODS.includes(req.method ?? '')) {
      return refused(405, `method ${String(req.method).slice(0, 16)}`, `agentvm egress: brokered requests are ${BROKERED_METHODS.join(', ')} only`);
    }
    const policy = await this.policyOf(vmId);
    const decision = policy ? decideName(policy, named) : { allowed: false, reason: 'the VM is gone' };
    if (!decision.allowed) return refused(403, decision.reason, `agentvm egress policy denies ${named}`);
    const key = await this.d.credentials.key(vmId, broker.env);
    if (key === null) {
      return refused(401, `no brokered ${broker.env} on this VM`, `agentvm egress: this VM has no ${broker.env}: set it with PUT /v1/api/vms/{id}/secrets (it is kept by the platform, never in the VM)`);
    }
    const t = await this.resolve(host, true);
    if (!t.ok) return refused(t.status, t.reason, refusalText(host, t));
    const tally = this.logged(vmId, named, port, true, `brokered ${broker.env}`);
    const headers = forwardHeaders(req, url.host);
    broker.authorize(headers, key);
    this.forward(req, res, tally, { url, address: t.address, headers });
  }

  private forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    tally: Tally,
    o: { url: URL; address: string; headers: http.OutgoingHttpHeaders; checkReached?: string },
  ): void {
    const secure = o.url.protocol === 'https:';
    const upstream = (secure ? https : http).request({
      protocol: o.url.protocol,
      host: o.url.hostname,
      port: o.url.port || (secure ? 443 : 80),
      path: `${o.url.pathname}${o.url.search}`,
      method: req.method,
      headers: o.headers,
      servername: secure && net.isIP(o.url.hostname) === 0 ? o.url.hostname : undefined,
      // The address this gateway checked, whatever the name resolves to by now.
      lookup: (_host, opts, cb) =>
        (opts as { all?: boolean }).all ? (cb as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: o.address, family: net.isIP(o.address) }]) : cb(null, o.address, net.isIP(o.address)),
      timeout: CONNECT_TIMEOUT_MS,
      agent: false,
    });
    let socket: net.Socket | null = null;
    upstream.once('socket', (s: net.Socket) => {
      socket = s;
      this.track(s);
      if (o.checkReached === undefined) return;
      const host = o.checkReached;
      s.once('connect', () => {
        if (this.reachedDenied(host, s)) upstream.destroy(new Error('the address reached is denied'));
      });
    });
    upstream.once('timeout', () => upstream.destroy(new Error('no answer in time')));
    upstream.once('response', (up) => {
      upstream.setTimeout(0);
      res.writeHead(up.statusCode ?? 502, up.statusMessage, withoutHopByHop(up.headers));
      up.pipe(res);
      up.once('error', () => res.destroy());
    });
    upstream.once('error', (err) => {
      if (!res.headersSent) refuse(res, 502, `agentvm egress: ${o.url.hostname}: ${err.message}`);
      else res.destroy();
    });
    res.once('close', () => {
      upstream.destroy();
      // Every byte of the exchange each way, the request line, headers and the answer's head included.
      const s = socket as net.Socket | null;
      tally.out += s?.bytesWritten ?? 0;
      tally.in += s?.bytesRead ?? 0;
      this.finish(tally);
    });
    req.pipe(upstream);
  }

  private fail(res: http.ServerResponse, err: unknown): void {
    this.d.log.error({ err }, 'egress gateway request failed');
    if (!res.headersSent) refuse(res, 502, 'agentvm egress: internal error');
    else res.destroy();
  }

  private failSocket(socket: Duplex, err: unknown): void {
    this.d.log.error({ err }, 'egress gateway CONNECT failed');
    refuseSocket(socket, 502, 'agentvm egress: internal error');
  }
}
