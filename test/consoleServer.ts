/** A console on a real HTTP server on loopback, with no VM host: what the browser test and the console benchmark drive. */
import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { buildCoreServices, buildServices, type Services } from '../src/domain/services.ts';
import { buildApp } from '../src/api/app.ts';
import { createLogger } from '../src/log.ts';
import { createMailer } from '../src/mail.ts';
import { randomBase62 } from '../src/domain/ids.ts';
import type { Clock } from '../src/domain/clock.ts';
import type { Db } from '../src/store/db.ts';

export interface ConsoleServer {
  url: string;
  services: Services;
  db: Db;
  logs: string[];
  /** A tenant with a card and credits, as the operator makes one. */
  tenant(email?: string): Promise<{ tenantId: string; email: string; key: string }>;
  /** The newest login code the server logged for an email (no SMTP: the log is where it goes). */
  codeFromLog(email: string): string;
  close(): Promise<void>;
}

export async function startConsoleServer(db: Db, opts: { clock?: Clock; capture?: (templateId: string) => void } = {}): Promise<ConsoleServer> {
  const logs: string[] = [];
  const log = createLogger('info', new Writable({ write: (c, _e, cb) => (logs.push(c.toString()), cb()) }));
  const services = buildServices(
    buildCoreServices(db, { clock: opts.clock }),
    { driver: async () => ({ usable: true, accel: 'tcg', qemu: '/usr/bin/qemu-system-x86_64', detail: 'tcg: console test' }), capture: opts.capture ?? (() => undefined) },
    { mailer: createMailer(undefined, 'console@agentvm.test', log) },
  );
  const app = buildApp({ services, log, adminToken: `avm_admin_${randomBase62(40)}`, rateLimit: { perSecond: 10_000, burst: 10_000 } });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // A VM host row with room, kept fresh, so that VMs are accepted (none boots: no host process runs them).
  const host = { host_id: 'host_console', name: 'console', accel: 'tcg', image_id: 'img_console', vcpus_total: 4096, memory_mib_total: 4096 * 8192, disk_gib_total: 1_000_000 };
  await services.hosts.register(host);
  const heartbeat = setInterval(() => void services.hosts.heartbeat(host.host_id, host.image_id).catch(() => undefined), 5000);
  return {
    url,
    services,
    db,
    logs,
    async tenant(email = `console-${randomBase62(6).toLowerCase()}@example.com`) {
      const t = await services.tenants.create(email);
      await services.billing.setCard(t.tenant_id, { brand: 'visa', last4: '4242' });
      await services.billing.addCredits(t.tenant_id, 5000);
      return { tenantId: t.tenant_id, email, key: t.api_key };
    },
    codeFromLog(email) {
      const line = logs.filter((l) => l.includes('login code') && l.includes(`"to":"${email}"`)).at(-1);
      const code = line && /login code is (\d{6})/.exec(line)?.[1];
      if (!code) throw new Error(`no login code for ${email} in the server log`);
      return code;
    },
    async close() {
      clearInterval(heartbeat);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await services.runFeed.close();
      await services.vmFeed.close();
    },
  };
}
