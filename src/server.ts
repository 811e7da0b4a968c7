import { serve, type ServerType } from '@hono/node-server';
import type { Server } from 'node:http';
import { mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config.ts';
import { openDb, type Db } from './store/db.ts';
import { buildCoreServices, buildServices, type CoreServices, type Services } from './domain/services.ts';
import { buildApp } from './api/app.ts';
import { createLogger, type Logger } from './log.ts';
import { LocalVmHost, unusableVmHost, type VmHost } from './host/vmHost.ts';
import { readHostId } from './host/hostRecord.ts';
import { probeDriver } from './vmm/probe.ts';
import { SecretBox } from './host/egress/secretBox.ts';
import { createMailer } from './mail.ts';
import { randomBase62 } from './domain/ids.ts';
import { buildInternalApp } from './host/internalApp.ts';
import { serveInternalShellSockets } from './host/internalShell.ts';
import { liveHostsProbe, RemoteHosts } from './replica/remoteHosts.ts';
import { RemoteSnapshots } from './replica/remoteSnapshots.ts';
import { WebhookSender } from './jobs/webhookSender.ts';
import { LifecycleJob } from './jobs/lifecycle.ts';
import { RemoteGuest } from './replica/remoteGuest.ts';
import { InternalClient, readInternalTls, readReplicaId, type InternalTls } from './replica/internalClient.ts';
import { InternalCredentials } from './domain/internalCredentials.ts';
import { hostAuthority, type InternalAuthority } from './host/internalAuth.ts';
import { FailureThrottle, RateLimiter } from './throttle.ts';
import https from 'node:https';
import { serveShellSockets, type ShellSockets } from './api/shellSocket.ts';
import { previewSite, servePreviews } from './api/preview.ts';
import { serveE2b } from './e2b/server.ts';
import { LocalPortAccess } from './host/portAccess.ts';
import { RemotePorts } from './replica/remotePorts.ts';
import { serveInternalPorts } from './host/internalPorts.ts';
import { servePortSockets } from './api/portSocket.ts';
import type { PortAccess } from './domain/previewAccess.ts';
import { hostsBaseImage, trackBaseImage } from './image/manifest.ts';

/** How long a stopping server lets requests in flight finish before it closes their connections. */
const SHUTDOWN_GRACE_MS = 5000;
/** How long an idle client connection is kept open. */
const KEEP_ALIVE_MS = 65_000;

export interface RunningServer {
  url: string;
  port: number;
  services: Services;
  host: VmHost;
  /** Resolves when the VM host's start in the background is done (VMs re-adopted, the image loaded or failed). */
  started: Promise<void>;
  /** Stops the server; VMs keep running for the next server to re-adopt unless `stopVms`. */
  close(opts?: { stopVms?: boolean }): Promise<void>;
}

/** The operator token: from the environment, else the one saved under the data dir, else a new one saved there. */
export async function resolveAdminToken(config: Config, log: Logger): Promise<string> {
  if (config.adminToken) return config.adminToken;
  const file = path.join(config.dataDir, 'admin-token');
  try {
    const saved = (await readFile(file, 'utf8')).trim();
    if (saved) return saved;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = `avm_admin_${randomBase62(40)}`;
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  log.info({ file }, 'generated an admin token; it is in this file (mode 0600)');
  return token;
}

/** Alive and not a zombie (a killed server whose parent has not reaped it yet holds nothing). */
async function processLives(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** PGlite allows one process per database directory: a pid file under the data dir keeps a second one out. */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const file = path.join(dataDir, 'server.pid');
  try {
    const pid = Number((await readFile(file, 'utf8')).trim());
    if (pid && pid !== process.pid && (await processLives(pid))) {
      throw new Error(`another agentvm server (pid ${pid}) is using ${dataDir}`);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await writeFile(file, `${process.pid}\n`);
  return () => rm(file, { force: true });
}

/** An API replica's stand-in for a VM host: its VMs are on other machines. */
function remoteVmHost(db: Db, staleMs: number): VmHost {
  const imageReady = Promise.reject(new Error('an API replica has no guest image'));
  imageReady.catch(() => undefined);
  return {
    hostId: '',
    driver: null,
    reconciler: null,
    executor: null,
    guest: null,
    capture: null,
    vmsChanged: () => undefined,
    imageReady,
    probe: () => liveHostsProbe(db, staleMs),
    start: async () => undefined,
    close: async () => undefined,
  };
}

/** This machine's VM host: a real one where QEMU is usable, else one that says what to install. */
async function localVmHost(config: Config, core: CoreServices, log: Logger): Promise<VmHost> {
  const hostId = await readHostId(config.dataDir);
  const probe = await probeDriver();
  if (!probe.usable || !probe.accel || !probe.qemu) return unusableVmHost(hostId, probe, log);
  const secrets = await SecretBox.open(config.dataDir, config.secretsKey);
  return new LocalVmHost({ config, hostId, probe, ...core, log, secrets });
}

/** The process's parts for its role, each built complete and in order: the core, the VM host, the domain, the app. */
async function compose(
  config: Config,
  db: Db,
  log: Logger,
  tls: InternalTls | null,
): Promise<{
  services: Services;
  host: VmHost;
  app: { fetch: (req: Request, env?: unknown) => Response | Promise<Response> };
  internal?: { authority: InternalAuthority; throttle: FailureThrottle; ports: PortAccess | null };
  /** Failed authentications per address: the API's, the console's and the previews' (section 14). */
  throttle: FailureThrottle;
  /** Requests per key: the API's and E2B's control plane's. */
  limiter: RateLimiter;
}> {
  const core = buildCoreServices(db, { hostStaleMs: config.hostStaleMs });
  const throttle = new FailureThrottle(() => core.clock.now().getTime(), undefined, undefined, config.trustedProxies);
  // Replicas and hosts register with a credential of their own for the internal endpoint.
  const credentials = new InternalCredentials(db, core.clock);
  const domainOpts = {
    mailer: createMailer(config.smtpUrl, config.mailFrom, log),
    runLimits: { timeoutMs: config.runTimeoutMs, maxOutputBytes: config.runOutputMaxBytes, maxQueued: config.runQueueMax },
    webhookAllowHosts: config.webhookAllowHosts,
  };
  const rateLimit = { perSecond: config.rateLimitPerSecond, burst: config.rateLimitBurst };
  const limiter = new RateLimiter(rateLimit.perSecond, rateLimit.burst, () => core.clock.now().getTime());
  if (config.role === 'api') {
    const replicaId = await readReplicaId(config.dataDir);
    const client = new InternalClient(await credentials.issue('replica', replicaId), tls);
    const remote = new RemoteHosts(db, client, log);
    const host = remoteVmHost(db, config.hostStaleMs);
    const services = buildServices(
      core,
      {
        driver: () => host.probe(),
        executor: remote,
        guest: new RemoteGuest(db, client, log),
        ports: new RemotePorts(db, client, log),
        capture: (templateId) => remote.capture(templateId),
        snapshots: new RemoteSnapshots(db, remote),
        snapshotTaker: replicaId,
        showLostHosts: true,
        baseImage: hostsBaseImage(config.imageDir, () => core.hosts.liveImageIds()),
      },
      domainOpts,
    );
    void services.snapshots.failCutShort().then(
      (n) => n && log.warn({ snapshots: n }, 'snapshots this replica left being made were failed'),
      (err) => log.error({ err }, 'failing the snapshots this replica left being made failed'),
    );
    return { services, host, throttle, app: buildApp({ services, log, adminToken: await resolveAdminToken(config, log), rateLimit, limiter, throttle }), limiter };
  }
  const host = await localVmHost(config, core, log);
  const ports = host.driver ? new LocalPortAccess(host.driver) : null;
  const services = buildServices(
    core,
    { driver: () => host.probe(), executor: host.executor, guest: host.guest, ports, capture: host.capture, snapshots: host.branching ?? null, vmsChanged: () => host.vmsChanged(), imagesQueued: () => host.imagesQueued?.(), baseImage: trackBaseImage(host.imageReady) },
    domainOpts,
  );
  if (config.role === 'host') {
    const authority = hostAuthority({ db, clock: core.clock, hostId: host.hostId, credential: await credentials.issue('host', host.hostId), credentials });
    const app = buildInternalApp({ authority, throttle, executor: host.executor, guest: host.guest, ports, capture: host.capture, snapshots: host.branching ?? null, probe: () => host.probe(), log });
    return { services, host, app, throttle, limiter, internal: { authority, throttle, ports } };
  }
  return { services, host, throttle, app: buildApp({ services, log, adminToken: await resolveAdminToken(config, log), rateLimit, limiter, throttle }), limiter };
}

export interface StartOptions {
  /** Makes a new embedded database in `dir` when there is none (the command does it in a process of its own). */
  makeDb?: (dir: string) => Promise<void>;
}

type Fetch = (req: Request, env?: unknown) => Response | Promise<Response>;

/** The error shape of the API, for the answers a server gives before its app is made. */
const unavailable = (message: string) => Response.json({ error: 'unavailable', message }, { status: 503 });

/**
 * The app of a server that listens before its app is made: until then /healthz answers that the process
 * is up, and any other request (/readyz too) waits for the app, or is a 503 if the start fails.
 */
function deferredApp(): { fetch: Fetch; ready(app: Fetch): void; failed(): void } {
  let app: Fetch | undefined;
  let settle!: (app: Fetch | null) => void;
  const made = new Promise<Fetch | null>((resolve) => (settle = resolve));
  return {
    fetch: (req, env) => {
      if (app) return app(req, env);
      const { pathname } = new URL(req.url);
      if (pathname === '/healthz') return Response.json({ ok: true });
      return made.then((a) => (a ? a(req, env) : unavailable('the server failed to start; see its log')));
    },
    ready: (a) => settle((app = a)),
    failed: () => settle(null),
  };
}

/**
 * Starts a process of its role and listens at once, before its database is open; the VM host's slow
 * start (re-adopting VMs, the guest image, the first snapshot) goes on in the background, and /readyz
 * says when it is done. Resolves once the app answers.
 */
export async function startServer(config: Config, log: Logger = createLogger(config.logLevel), opts: StartOptions = {}): Promise<RunningServer> {
  if (config.role !== 'all') {
    if (!config.databaseUrl) throw new Error(`role ${config.role} needs DATABASE_URL: API replicas and VM hosts share one PostgreSQL server`);
  }
  if (process.env.AGENTVM_INTERNAL_TOKEN) {
    log.warn('AGENTVM_INTERNAL_TOKEN is no longer used: each API replica and VM host registers a credential of its own');
  }
  const tls = config.role === 'all' ? null : await readInternalTls(config.internalTls);
  if (tls && config.role === 'host' && config.hostUrl && !config.hostUrl.startsWith('https://')) {
    throw new Error('AGENTVM_HOST_URL must be an https:// URL when the internal endpoint has TLS (AGENTVM_INTERNAL_TLS_*)');
  }
  // Where a slow start goes: the modules (process start → here), the database's open (recovery after a crash).
  const loadedMs = Math.round(performance.now());
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  // One server per data dir: it holds the embedded database and the VMs' disks.
  const unlock = await lockDataDir(config.dataDir);

  // The operator's token and the host's id are on disk before the server listens (scripts read them as soon as it does).
  if (config.role !== 'host') await resolveAdminToken(config, log);
  if (config.role !== 'api') await readHostId(config.dataDir);

  // It listens first: a request that comes while the database opens waits for the app (a restarted
  // server takes connections at once instead of refusing them for as long as its database recovers).
  const front = deferredApp();
  // A host's internal endpoint over TLS when the operator gave certificates; with a CA, replicas must show theirs.
  const internalHttps = config.role === 'host' && tls;
  let server: ServerType;
  try {
    server = await new Promise((resolve, reject) => {
      const s = serve(
        {
          fetch: front.fetch,
          hostname: config.host,
          port: config.port,
          ...(internalHttps
            ? { createServer: https.createServer, serverOptions: { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: !!tls.ca, rejectUnauthorized: !!tls.ca } }
            : {}),
        },
        () => resolve(s),
      );
      s.once('error', reject);
    });
  } catch (err) {
    await unlock();
    throw err;
  }
  // Idle connections are kept a minute, not Node's 5 s: a keep-alive client (undici's pool, an SDK) that
  // reuses one the moment the server drops it loses that request ("other side closed"); the longer
  // the time, the rarer the moment.
  (server as Server).keepAliveTimeout = KEEP_ALIVE_MS;
  (server as Server).headersTimeout = KEEP_ALIVE_MS + 1000;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `${internalHttps ? 'https' : 'http'}://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  // listen_ms: from the process's start, so that a slow start shows in the log (the chaos test reads it).
  log.info({ url, role: config.role, listen_ms: Math.round(process.uptime() * 1000) }, 'agentvm is listening');

  const opening = performance.now();
  let db: Db | undefined;
  let composed: Awaited<ReturnType<typeof compose>>;
  try {
    if (opts.makeDb && !config.databaseUrl) await opts.makeDb(path.join(config.dataDir, 'db'));
    db = await openDb({ databaseUrl: config.databaseUrl, pgliteDir: path.join(config.dataDir, 'db') });
    log.info(
      { database: db.kind, loaded_ms: loadedMs, open_ms: Math.round(performance.now() - opening) },
      db.kind === 'pglite' ? 'embedded PostgreSQL (PGlite) ready' : 'PostgreSQL server ready',
    );
    composed = await compose(config, db, log, tls);
  } catch (err) {
    front.failed();
    await new Promise((resolve) => server.close(resolve));
    await db?.close().catch(() => undefined);
    await unlock();
    throw err;
  }
  const { services, host, app, internal, throttle, limiter } = composed;
  front.ready(app.fetch);
  // Shell sockets: the customer's on the API, the replicas' on a host's internal endpoint.
  const sockets: ShellSockets = config.role === 'host'
    ? serveInternalShellSockets(server as Server, { ...internal!, guest: host.guest, log })
    : serveShellSockets(server as Server, services, log);
  // A host's port connections for the replicas; the API's port forwards; previews, taken ahead of the
  // API's router and its sockets.
  if (config.role === 'host') serveInternalPorts(server as Server, { ...internal!, log });
  else {
    services.previews.site = previewSite(port);
    servePortSockets(server as Server, services.previews, throttle, log);
    servePreviews(server as Server, services.previews, throttle, log);
    // E2B's API (section 17), ahead of the previews: its sandbox hosts are preview hosts of port 49983.
    serveE2b(server as Server, services, 'guest' in host ? host.guest ?? null : null, log, { throttle, limiter });
  }
  log.info({ role: config.role, ready_ms: Math.round(process.uptime() * 1000) }, 'agentvm is ready');
  // Where the API replicas reach this host's internal endpoint.
  const started = host.start(config.role === 'host' ? { internalUrl: config.hostUrl ?? url } : {});
  // Background work every process shares through claimed rows: webhook deliveries, idle stop, expiry, the event prune.
  const sender = new WebhookSender({
    db,
    clock: services.clock,
    log,
    allowHosts: config.webhookAllowHosts,
    timeoutMs: config.webhookTimeoutMs,
    retryBaseMs: config.webhookRetryBaseMs,
  });
  sender.start();
  const lifecycle = new LifecycleJob({ services, log, intervalMs: config.lifecycleIntervalMs });
  lifecycle.start();

  let closing: Promise<void> | undefined;
  const close = (opts?: { stopVms?: boolean }) =>
    (closing ??= (async () => {
      sockets.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Idle keep-alive sockets would hold close() open; in-flight requests get a few seconds to
        // finish, then every connection is closed: a stream that never ends (an MCP client's event
        // stream, a long run) must not hold a stopping server forever.
        const s = server as unknown as { closeIdleConnections?: () => void; closeAllConnections?: () => void };
        s.closeIdleConnections?.();
        setTimeout(() => s.closeAllConnections?.(), SHUTDOWN_GRACE_MS).unref();
      });
      await Promise.all([sender.stop(), lifecycle.stop()]);
      await host.close(opts);
      await services.runFeed.close();
      await services.vmFeed.close();
      await db.close();
      await unlock();
      log.info('agentvm stopped');
      log.flush();
    })());
  return { url, port, services, host, started, close };
}
