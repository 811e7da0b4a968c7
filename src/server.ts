import { serve, type ServerType } from '@hono/node-server';
import { mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config.ts';
import { openDb, type Db } from './store/db.ts';
import { buildServices, type Services } from './domain/services.ts';
import { buildApp } from './api/app.ts';
import { createLogger, type Logger } from './log.ts';
import { startVmHost, type VmHost } from './host.ts';
import { createMailer } from './mail.ts';
import { randomBase62 } from './domain/ids.ts';
import { buildInternalApp, liveHostsProbe, RemoteHosts } from './scaleout.ts';

export interface RunningServer {
  url: string;
  port: number;
  services: Services;
  host: VmHost;
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
function remoteVmHost(db: Db, config: Config): VmHost {
  const imageReady = Promise.reject(new Error('an API replica has no guest image'));
  imageReady.catch(() => undefined);
  return { hostId: '', driver: null, reconciler: null, imageReady, probe: () => liveHostsProbe(db, config.hostStaleMs), close: async () => undefined };
}

export async function startServer(config: Config, log: Logger = createLogger(config.logLevel)): Promise<RunningServer> {
  if (config.role !== 'all') {
    if (!config.databaseUrl) throw new Error(`role ${config.role} needs DATABASE_URL: API replicas and VM hosts share one PostgreSQL server`);
    if (!config.internalToken) throw new Error(`role ${config.role} needs AGENTVM_INTERNAL_TOKEN, the secret API replicas and VM hosts share`);
  }
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  // One server per data dir: it holds the embedded database and the VMs' disks.
  const unlock = await lockDataDir(config.dataDir);
  let db: Db;
  try {
    db = await openDb({ databaseUrl: config.databaseUrl, pgliteDir: path.join(config.dataDir, 'db') });
  } catch (err) {
    await unlock();
    throw err;
  }
  log.info({ database: db.kind }, db.kind === 'pglite' ? 'embedded PostgreSQL (PGlite) ready' : 'PostgreSQL server ready');
  let host: VmHost | undefined;
  const services = buildServices(db, {
    driver: () => host?.probe() ?? Promise.resolve({ usable: false, accel: null, qemu: null, detail: 'starting' }),
    mailer: createMailer(config.smtpUrl, config.mailFrom, log),
    runLimits: { timeoutMs: config.runTimeoutMs, maxOutputBytes: config.runOutputMaxBytes, maxQueued: config.runQueueMax },
  });
  if (config.role !== 'all') services.hosts.staleMs = config.hostStaleMs;
  if (config.role === 'api') {
    host = remoteVmHost(db, config);
    const remote = new RemoteHosts(db, config.internalToken!, log);
    services.runs.executor = remote;
    services.templates.capturer = (templateId) => remote.capture(templateId);
    services.vms.showLostHosts = true;
  } else {
    host = await startVmHost(config, services, log);
  }
  const adminToken = await resolveAdminToken(config, log);
  const vmHostNow = host;
  const app =
    config.role === 'host'
      ? buildInternalApp({
          token: config.internalToken!,
          executor: services.runs.executor!,
          capture: (templateId) => services.templates.capturer?.(templateId),
          probe: () => vmHostNow.probe(),
          log,
        })
      : buildApp({ services, log, adminToken, rateLimit: { perSecond: config.rateLimitPerSecond, burst: config.rateLimitBurst } });

  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: config.host, port: config.port }, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  if (config.role === 'host') {
    // Where the API replicas reach this host's internal endpoint.
    await db.query('UPDATE hosts SET internal_url = $2 WHERE host_id = $1', [host.hostId, config.hostUrl ?? url]);
  }
  log.info({ url, role: config.role }, 'agentvm is listening');

  let closing: Promise<void> | undefined;
  const vmHost = host;
  const close = (opts?: { stopVms?: boolean }) =>
    (closing ??= (async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Idle keep-alive sockets would hold close() open; in-flight requests still finish.
        (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      });
      await vmHost.close(opts);
      await db.close();
      await unlock();
      log.info('agentvm stopped');
      log.flush();
    })());
  return { url, port, services, host: vmHost, close };
}
