import { serve, type ServerType } from '@hono/node-server';
import { mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config.ts';
import { openDb, type Db } from './store/db.ts';
import { buildServices, type Services } from './domain/services.ts';
import { buildApp } from './api/app.ts';
import { createLogger, type Logger } from './log.ts';
import { probeDriver, type DriverProbe } from './vmm/probe.ts';
import { randomBase62 } from './domain/ids.ts';

export interface RunningServer {
  url: string;
  port: number;
  services: Services;
  close(): Promise<void>;
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

/** PGlite allows one process per database directory: a pid file under the data dir keeps a second one out. */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const file = path.join(dataDir, 'server.pid');
  try {
    const pid = Number((await readFile(file, 'utf8')).trim());
    if (pid && pid !== process.pid) {
      try {
        process.kill(pid, 0);
        throw new Error(`another agentvm server (pid ${pid}) is using ${dataDir}`);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await writeFile(file, `${process.pid}\n`);
  return () => rm(file, { force: true });
}

/** A cached probe: /readyz asks often, the answer changes rarely. */
function cachedDriverProbe(ttlMs = 5000): () => Promise<DriverProbe> {
  let cached: { at: number; value: Promise<DriverProbe> } | undefined;
  return () => {
    if (!cached || Date.now() - cached.at > ttlMs) cached = { at: Date.now(), value: probeDriver() };
    return cached.value;
  };
}

export async function startServer(config: Config, log: Logger = createLogger(config.logLevel)): Promise<RunningServer> {
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const unlock = config.databaseUrl ? async () => undefined : await lockDataDir(config.dataDir);
  let db: Db;
  try {
    db = await openDb({ databaseUrl: config.databaseUrl, pgliteDir: path.join(config.dataDir, 'db') });
  } catch (err) {
    await unlock();
    throw err;
  }
  log.info({ database: db.kind }, db.kind === 'pglite' ? 'embedded PostgreSQL (PGlite) ready' : 'PostgreSQL server ready');
  const driver = cachedDriverProbe();
  const probe = await driver();
  if (probe.usable) log.info({ accel: probe.accel, qemu: probe.qemu }, `VM driver: ${probe.detail}`);
  else log.warn({ detail: probe.detail }, 'VM driver not usable: /readyz answers 503');
  const services = buildServices(db, { driver });
  const adminToken = await resolveAdminToken(config, log);
  const app = buildApp({ services, log, adminToken, rateLimit: { perSecond: config.rateLimitPerSecond, burst: config.rateLimitBurst } });

  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: config.host, port: config.port }, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  log.info({ url }, 'agentvm is listening');

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Idle keep-alive sockets would hold close() open; in-flight requests still finish.
        (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.();
      });
      await db.close();
      await unlock();
      log.info('agentvm stopped');
      log.flush();
    })());
  return { url, port, services, close };
}
