/**
 * Several machines: stateless API replicas (`serve --role api`) and VM hosts (`agentvm host`) on one
 * PostgreSQL. Rows coordinate everything (placement, desired state, leases, heartbeats); the one
 * thing a replica cannot do through rows is talk to a guest, so each host serves an internal HTTP
 * endpoint for the runs, secrets and captures of its own VMs, behind a shared bearer token
 * (AGENTVM_INTERNAL_TOKEN). Replicas find a VM's host by its row and the host's `internal_url`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Hono } from 'hono';
import type { Db } from './store/db.ts';
import type { Logger } from './log.ts';
import type { VmExecutor } from './domain/runs.ts';
import type { ExecResult, RunArgs } from './guest/protocol.ts';
import type { DriverProbe } from './vmm/probe.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** The host side: only health, readiness and /internal/*, every /internal/* call with the token. */
export function buildInternalApp(o: {
  token: string;
  /** Null where this machine cannot run VMs (no QEMU): every internal call is then 503. */
  executor: VmExecutor | null;
  capture: ((templateId: string) => void) | null;
  probe: () => Promise<DriverProbe>;
  log: Logger;
}): Hono {
  const app = new Hono();
  const want = digest(o.token);
  // One run at a time per VM, whichever replica sent it.
  const tails = new Map<string, Promise<unknown>>();
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    const p = await o.probe();
    return c.json({ ok: p.usable, driver: { accel: p.accel, detail: p.detail } }, p.usable ? 200 : 503);
  });
  app.use('/internal/*', async (c, next) => {
    const token = /^Bearer (.+)$/.exec(c.req.header('authorization') ?? '')?.[1];
    if (!token || !timingSafeEqual(digest(token), want)) return c.json({ error: 'unauthorized', message: '' }, 401);
    if (!o.executor || !o.capture) return c.json({ error: 'unavailable', message: 'this host cannot run VMs' }, 503);
    await next();
  });
  app.onError((err, c) => {
    o.log.warn({ err, path: c.req.path }, 'internal request failed');
    return c.json({ error: 'internal', message: err.message }, 500);
  });
  app.get('/internal/vms/:id/harnesses', async (c) => c.json({ harnesses: await o.executor!.harnesses(c.req.param('id')) }));
  app.post('/internal/vms/:id/run', async (c) => {
    const vmId = c.req.param('id');
    const { args, timeout_ms } = (await c.req.json()) as { args: RunArgs; timeout_ms: number };
    const mine = (tails.get(vmId) ?? Promise.resolve()).catch(() => undefined).then(() => o.executor!.run(vmId, args, timeout_ms));
    tails.set(vmId, mine);
    try {
      return c.json(await mine);
    } finally {
      if (tails.get(vmId) === mine) tails.delete(vmId);
    }
  });
  app.post('/internal/vms/:id/secrets', async (c) => {
    const { set } = (await c.req.json()) as { set: Record<string, string | null> };
    return c.json({ names: await o.executor!.setSecrets(c.req.param('id'), set) });
  });
  app.post('/internal/templates/:id/capture', (c) => {
    o.capture!(c.req.param('id'));
    return c.json({ started: true }, 202);
  });
  return app;
}

/** The replica side: each call goes to the host the VM's row names. */
export class RemoteHosts implements VmExecutor {
  constructor(
    private readonly db: Db,
    private readonly token: string,
    private readonly log: Logger,
  ) {}

  private async urlOfVm(vmId: string): Promise<string | null> {
    const [row] = await this.db.query<{ internal_url: string | null }>(
      'SELECT h.internal_url FROM vms v JOIN hosts h ON h.host_id = v.host_id WHERE v.vm_id = $1',
      [vmId],
    );
    return row?.internal_url ?? null;
  }

  private async call<T>(base: string | null, method: string, p: string, body?: unknown, timeoutMs = 30_000): Promise<T> {
    if (!base) throw new Error('the VM has no reachable host');
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const json = (await res.json().catch(() => ({}))) as T & { message?: string };
    if (!res.ok) throw new Error(`the VM's host answered ${res.status}: ${json.message ?? ''}`);
    return json;
  }

  async harnesses(vmId: string): Promise<string[] | null> {
    try {
      return (await this.call<{ harnesses: string[] | null }>(await this.urlOfVm(vmId), 'GET', `/internal/vms/${vmId}/harnesses`, undefined, 5000)).harnesses;
    } catch {
      return null; // its host is down or unreachable: the VM cannot run anything now
    }
  }

  async run(vmId: string, args: RunArgs, timeoutMs: number): Promise<ExecResult> {
    return this.call<ExecResult>(await this.urlOfVm(vmId), 'POST', `/internal/vms/${vmId}/run`, { args, timeout_ms: timeoutMs }, timeoutMs + 5000);
  }

  async setSecrets(vmId: string, set: Record<string, string | null>): Promise<string[]> {
    return (await this.call<{ names: string[] }>(await this.urlOfVm(vmId), 'POST', `/internal/vms/${vmId}/secrets`, { set })).names;
  }

  /** Hands a capture to the host of the template's source VM; a host that cannot be reached fails it. */
  capture(templateId: string): void {
    void (async () => {
      const [row] = await this.db.query<{ internal_url: string | null }>(
        `SELECT h.internal_url FROM templates t JOIN vms v ON v.vm_id = t.source_vm_id JOIN hosts h ON h.host_id = v.host_id
         WHERE t.template_id = $1`,
        [templateId],
      );
      await this.call(row?.internal_url ?? null, 'POST', `/internal/templates/${templateId}/capture`);
    })().catch(async (err: Error) => {
      this.log.warn({ err, template_id: templateId }, 'handing a capture to its host failed');
      await this.db
        .query(`UPDATE templates SET status = 'failed', status_reason = $2 WHERE template_id = $1 AND status = 'capturing'`, [
          templateId,
          `the VM's host could not be reached: ${err.message}`.slice(0, 300),
        ])
        .catch(() => undefined);
    });
  }
}

/** What an API replica's /readyz says of VM hosts: usable while at least one host is live. */
export async function liveHostsProbe(db: Db, staleMs: number): Promise<DriverProbe> {
  const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM hosts WHERE NOT draining AND heartbeat_at > $1', [
    new Date(Date.now() - staleMs),
  ]);
  return row.n > 0
    ? { usable: true, accel: null, qemu: null, detail: `${row.n} live VM host(s)` }
    : { usable: false, accel: null, qemu: null, detail: 'no live VM host' };
}
