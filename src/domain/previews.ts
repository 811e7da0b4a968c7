/**
 * Preview URLs (decisions section 16): which VM and port a request names, whether it may reach it
 * (the tenant's API key, the VM's preview token, or a public port), waking a suspended VM whose
 * `auto_resume` is on, and the ports, public flags and token a customer manages. The bytes go by
 * PortAccess (the VM's data channel); the HTTP side is api/preview.ts.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { Clock } from './clock.ts';
import type { Db } from '../store/db.ts';
import { DomainError, invalid, notFound } from './errors.ts';
import { looksLikeApiKey, type KeyService } from './keys.ts';
import type { VmService } from './vms.ts';
import type { PortAccess } from './previewAccess.ts';
import * as store from '../store/previews.ts';
import { touchActivity } from '../store/vms.ts';
import type { FailureThrottle } from '../throttle.ts';

export type { PreviewTarget } from '../store/previews.ts';

/** How long a request to a suspended `auto_resume` VM waits for it to run and its port to listen. */
export const RESUME_WAIT_MS = 30_000;
/** How often a request that woke its VM looks again for its port to listen. */
const WAKE_PORT_POLL_MS = 200;
/** A VM's idle clock hears of proxied requests at most this often. */
const ACTIVITY_EVERY_MS = 10_000;
const TOKEN_PREFIX = 'avm_pt_';
/** Where a VM with auto_resume is on its way to running, or can be sent: a request waits for it. */
const WAKING = new Set(['suspended', 'suspending', 'starting']);

/** Ports a preview may reach: 1024–65535, and 80 and 443. */
export function previewablePort(port: number): boolean {
  return Number.isInteger(port) && ((port >= 1024 && port <= 65535) || port === 80 || port === 443);
}

/** A port from a request's text: 400 naming `field` when it is not one a preview may reach. */
export function checkedPort(text: string | number, field = 'port'): number {
  const port = typeof text === 'number' ? text : /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!previewablePort(port)) throw invalid(field, 'must be a port from 1024 to 65535, or 80 or 443');
  return port;
}

/** Whether a Host header's value is one a VM's previews may set: printable, no spaces, at most 255. */
export const validPreviewHost = (host: string) => /^[\x21-\x7e]{1,255}$/.test(host);

/** The Host a VM's app gets for a request to `port`: the VM's own (`${PORT}` as the port), else the client's. */
export const hostForApp = (t: { preview_host: string | null }, port: number): string | null => t.preview_host?.replaceAll('${PORT}', String(port)) ?? null;

/** A VM's label in preview hosts: its id lowercased, `_` as `-` (its hostname). */
export const previewLabel = (vmId: string) => vmId.toLowerCase().replace(/_/g, '-');

/** Where preview hosts live and how they are reached. */
export interface PreviewSite {
  /** `AGENTVM_PREVIEW_DOMAIN`, e.g. `preview.example.com` or `localhost:8080`. */
  domain: string;
  scheme: 'http' | 'https';
}

/** What a request names: a VM by label (its Host) or by id (the routing headers), and a port. */
export type PreviewRoute = { port: number } & ({ label: string } | { vmId: string });

/**
 * What a Host names under `domain`, lowercased (`3000-vm-abc` of `3000-vm-abc.example.com`; the port
 * compared only when the domain has one), or null when it is not under it.
 */
export function nameUnder(host: string | undefined, domain: string): string | null {
  if (!host) return null;
  const d = domain.toLowerCase();
  const h = d.includes(':') ? host.toLowerCase() : host.toLowerCase().replace(/:\d+$/, '');
  return h.endsWith(`.${d}`) ? h.slice(0, -(d.length + 1)) : null;
}

/**
 * The route a Host names under `domain` (compared without a port when the domain has none); null when
 * it is not a preview host; 400 when it is one but malformed.
 */
export function routeFromHost(host: string | undefined, domain: string): PreviewRoute | null {
  const name = nameUnder(host, domain);
  if (name === null) return null;
  const m = /^(\d{1,5})-([a-z0-9][a-z0-9-]{0,62})$/.exec(name);
  if (!m) throw invalid('Host', `a preview host is {port}-{vm label}.${domain}`);
  return { port: checkedPort(m[1], 'Host'), label: m[2] };
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface PreviewCredentials {
  /** The Bearer of an Authorization header. */
  bearer: string | null;
  /** The X-Agentvm-Preview-Token header, the cookie, or the query's token. */
  token: string | null;
}

export interface PortInfo {
  port: number;
  process: string | null;
  public: boolean;
  url: string;
}

export class PreviewService {
  site: PreviewSite = { domain: 'localhost', scheme: 'http' };
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly vms: VmService,
    private readonly keys: KeyService,
    private readonly ports: PortAccess | null,
  ) {}

  url(vmId: string, port: number): string {
    return `${this.site.scheme}://${port}-${previewLabel(vmId)}.${this.site.domain}/`;
  }

  /** The VM a route names; 404 for none (or a label two ids share). */
  async target(route: PreviewRoute): Promise<store.PreviewTarget> {
    if ('vmId' in route) {
      const t = /^vm_[A-Za-z0-9]{1,64}$/.test(route.vmId) ? await store.findById(this.db, route.vmId) : null;
      if (!t) throw notFound('VM');
      return t;
    }
    const rows = await store.findByLabel(this.db, route.label);
    if (rows.length !== 1) throw notFound('VM');
    return rows[0];
  }

  /** Whether the VM's token is `token`. */
  async tokenMatches(vmId: string, token: string): Promise<boolean> {
    if (!token.startsWith(TOKEN_PREFIX) || token.length > 200) return false;
    const hash = await store.tokenHash(this.db, vmId);
    return hash !== null && sameHash(hash, sha256(token));
  }

  /** Whether a request with these credentials may reach `port` of the VM. */
  async allowed(t: store.PreviewTarget, port: number, creds: PreviewCredentials): Promise<boolean> {
    return (await store.isPublic(this.db, t.vm_id, port)) || this.credentialed(t, creds);
  }

  /** Whether the credentials are the VM tenant's API key or the VM's preview token. */
  private async credentialed(t: store.PreviewTarget, creds: PreviewCredentials): Promise<boolean> {
    if (creds.bearer) {
      const p = await this.keys.authenticate(creds.bearer);
      if (p && p.tenantId === t.tenant_id) return true;
    }
    return creds.token !== null && (await this.tokenMatches(t.vm_id, creds.token));
  }

  /**
   * Lets a request reach `port` of the VM, or refuses it with 401: a public port needs nothing. An
   * address over its failed authentications (section 14) is refused with 429 before a credential is
   * looked at; a preview token, or an API key, that fails counts against it (an app's own Bearer does not).
   */
  async admit(t: store.PreviewTarget, port: number, creds: PreviewCredentials, throttle: FailureThrottle, address: string | null): Promise<void> {
    if (await store.isPublic(this.db, t.vm_id, port)) return;
    throttle.check(address);
    if (await this.credentialed(t, creds)) return;
    if (creds.token !== null || (creds.bearer !== null && looksLikeApiKey(creds.bearer))) throttle.fail(address);
    throw new DomainError('unauthorized', '');
  }

  /** `?agentvm_token=` on a preview URL: the VM's token, or 401 (and a failure of the address). */
  async admitQueryToken(t: store.PreviewTarget, token: string, throttle: FailureThrottle, address: string | null): Promise<void> {
    throttle.check(address);
    if (await this.tokenMatches(t.vm_id, token)) return;
    throttle.fail(address);
    throw new DomainError('unauthorized', '');
  }

  /**
   * The VM running, or 409 vm_not_running; a suspended `auto_resume` VM is started and waited for
   * (≤ RESUME_WAIT_MS). So is one a request finds on its way there: being suspended (started once it
   * is), or starting (another request woke it: a page's assets, a second tab, a socket that reconnects).
   * Answers, when this request waited for it, how long its port may be waited for (connect's `wait`:
   * a process suspended while it was starting goes on with its start once the VM runs again).
   */
  async running(t: store.PreviewTarget, signal?: AbortSignal): Promise<{ until: number; signal?: AbortSignal } | undefined> {
    if (t.status === 'running') return undefined;
    const notRunning = (status: string) =>
      new DomainError('vm_not_running', `VM ${t.vm_id} is ${status}`, 'start the VM (or set auto_resume to have a request wake it from suspended)');
    if (!t.auto_resume || !WAKING.has(t.status)) throw notRunning(t.status);
    const until = Date.now() + RESUME_WAIT_MS;
    let status = t.status;
    if (status === 'suspending') status = (await this.vms.waitFor(t.tenant_id, t.vm_id, 'suspended', RESUME_WAIT_MS, signal)).status;
    if (status === 'suspended') await this.vms.lifecycle(t.tenant_id, t.vm_id, 'start');
    else if (status !== 'starting' && status !== 'running') throw notRunning(status);
    const vm = await this.vms.waitFor(t.tenant_id, t.vm_id, 'running', Math.max(0, until - Date.now()), signal);
    if (vm.status !== 'running') throw notRunning(vm.status);
    return { until, signal };
  }

  /**
   * A connection to the port; 502 port_closed when nothing listens. With `wait` (a request that woke
   * the VM), a closed port is tried again until `wait.until`: a process suspended while it was starting
   * goes on with its start once the VM runs again.
   */
  async connect(t: store.PreviewTarget, port: number, wait?: { until: number; signal?: AbortSignal }): Promise<Duplex> {
    if (!this.ports) throw new DomainError('unavailable', 'previews are served by the server that hosts the VM; this one hosts none', 'try again later', { 'Retry-After': '30' });
    let socket = await this.ports.connect(t.vm_id, port);
    while (!socket && wait && Date.now() + WAKE_PORT_POLL_MS < wait.until && !wait.signal?.aborted) {
      await new Promise((r) => setTimeout(r, WAKE_PORT_POLL_MS));
      socket = await this.ports.connect(t.vm_id, port);
    }
    if (!socket) throw new DomainError('port_closed', `nothing listens on port ${port} in VM ${t.vm_id}`, 'start a server in the VM that listens on that port');
    this.activity(t.vm_id);
    return socket;
  }

  /** A proxied request is activity for the VM's idle stop. */
  activity(vmId: string): void {
    const now = this.clock.now();
    if ((this.touched.get(vmId) ?? 0) > now.getTime() - ACTIVITY_EVERY_MS) return;
    this.touched.set(vmId, now.getTime());
    if (this.touched.size > 10_000) this.touched.clear();
    touchActivity(this.db, vmId, now).catch(() => undefined);
  }

  /** `listVMPorts`: what listens in the VM now. */
  async list(tenantId: string, vmId: string): Promise<PortInfo[]> {
    const vm = await this.vms.get(tenantId, vmId);
    if (vm.status !== 'running') throw new DomainError('vm_not_running', `VM ${vmId} is ${vm.status}`, 'start the VM and wait until it is running');
    if (!this.ports) throw new DomainError('unavailable', 'the ports of a VM are listed by the server that hosts it', 'try again later', { 'Retry-After': '30' });
    const [listening, pub, all] = await Promise.all([this.ports.list(vmId), store.publicPorts(this.db, vmId), store.allPublic(this.db, vmId)]);
    return listening.map((l) => ({ port: l.port, process: l.process, public: all || pub.includes(l.port), url: this.url(vmId, l.port) }));
  }

  /** `setVMPort`: a port public (no credential needed) or private again. */
  async setPublic(tenantId: string, vmId: string, portText: string | number, on: boolean): Promise<PortInfo> {
    await this.vms.get(tenantId, vmId);
    const port = checkedPort(portText);
    const listening = this.ports ? await this.ports.list(vmId).catch(() => []) : [];
    // A port made private on a VM whose every port was public (an E2B sandbox's): the others stay public one by one.
    if (!on && (await store.allPublic(this.db, vmId))) {
      for (const l of listening) if (l.port !== port) await store.setPublic(this.db, vmId, l.port, true, this.clock.now());
      await store.setAllPublic(this.db, vmId, false);
    }
    await store.setPublic(this.db, vmId, port, on, this.clock.now());
    const process = listening.find((l) => l.port === port)?.process ?? null;
    return { port, process, public: on, url: this.url(vmId, port) };
  }

  /** Every port of the VM public, or not (an E2B sandbox's allowPublicTraffic, decisions section 17). */
  setAllPortsPublic(vmId: string, on: boolean): Promise<void> {
    return store.setAllPublic(this.db, vmId, on);
  }

  /** The Host the VM's apps get through its previews (`${PORT}`: the port), or null for the client's. */
  setPreviewHost(vmId: string, host: string | null): Promise<void> {
    if (host !== null && !validPreviewHost(host)) throw invalid('maskRequestHost', 'a host name, with `${PORT}` for the port if you like: printable characters, no spaces, at most 255');
    return store.setPreviewHost(this.db, vmId, host);
  }

  allPortsPublic(vmId: string): Promise<boolean> {
    return store.allPublic(this.db, vmId);
  }

  /** `rotatePreviewToken`: a new token; the old one no longer works. */
  async rotateToken(tenantId: string, vmId: string): Promise<string> {
    await this.vms.get(tenantId, vmId);
    const token = `${TOKEN_PREFIX}${randomBytes(24).toString('base64url')}`;
    await store.setTokenHash(this.db, vmId, sha256(token), this.clock.now());
    return token;
  }

  /** Sets whether a request to the suspended VM starts it. */
  async setAutoResume(tenantId: string, vmId: string, on: boolean): Promise<void> {
    if (!(await store.setAutoResume(this.db, tenantId, vmId, on))) throw notFound('VM');
  }
}
