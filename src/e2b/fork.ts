/**
 * E2B's fork (decisions section 17): `POST /e2b/sandboxes/{id}/fork`, sandboxes started from a snapshot
 * of a running one, each money like a create.
 */
import type { Context, Hono } from 'hono';
import { randomBytes } from 'node:crypto';
import { E2bError, e2bError, e2bErrorOf } from './errors.ts';
import type { Services } from '../domain/services.ts';
import type { VmRow } from '../domain/vms.ts';
import { previewLabel } from '../domain/previews.ts';
import type { Logger } from '../log.ts';
import * as store from './store.ts';
import { DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S } from './store.ts';


export function forkRoute<E extends { Variables: { principal: { tenantId: string } } }, S>(
  app: Hono<E>,
  services: Services,
  log: Logger,
  o: {
    vmOf(c: Context<E>): Promise<{ vm: VmRow; record: store.SandboxRecord | null }>;
    writable(c: Context<E>): void;
    created(vm: VmRow, r: store.SandboxRecord): S;
    startWaitMs: number;
  },
): void {
  /**
   * E2B's fork: one snapshot of the running sandbox (it runs on), then `count` sandboxes started from
   * it, each money like a create (createVMFromSnapshot), each answered on its own; the snapshot goes
   * once they run. The forks keep the sandbox's template, metadata and envs. Quota, money and room for
   * all `count` are looked at first: a fork that cannot have them all is refused whole (403, 402, 503).
   */
  app.post('/sandboxes/:sandboxID/fork', async (c) => {
    o.writable(c);
    const { vm, record } = await o.vmOf(c);
    const body = ((await c.req.json().catch(() => null)) ?? {}) as { count?: unknown; timeout?: unknown };
    const count = body.count ?? 1;
    if (!Number.isInteger(count) || (count as number) < 1 || (count as number) > 10) return e2bError(c, 400, 'count: a whole number from 1 to 10');
    const timeout = body.timeout ?? DEFAULT_TIMEOUT_S;
    if (!Number.isInteger(timeout) || (timeout as number) < 1 || (timeout as number) > MAX_TIMEOUT_S) return e2bError(c, 400, `timeout: whole seconds from 1 to ${MAX_TIMEOUT_S}`);
    // All of them or none over a limit, the money or the room, refused before the sandbox is paused.
    await services.snapshots.admitCopies(vm.tenant_id, vm.vm_id, count as number);
    const snap = await services.snapshots.create(vm.tenant_id, vm.vm_id, { name: `fork of ${previewLabel(vm.vm_id)}` });
    const results: Array<{ sandbox?: ReturnType<typeof o.created>; error?: { code: number; message: string } }> = [];
    try {
      for (let i = 0; i < (count as number); i++) {
        try {
          const now = services.clock.now();
          const end = new Date(now.getTime() + (timeout as number) * 1000);
          const started = await services.snapshots.startVms(vm.tenant_id, snap.snapshot_id, { expires_at: end.toISOString() });
          const fork: store.SandboxRecord = {
            vm_id: started.body.vm_ids[0],
            tenant_id: vm.tenant_id,
            template_id: record?.template_id ?? 'base',
            access_token: `ea_${randomBytes(24).toString('hex')}`,
            // A private sandbox's forks are private too, each with a token of its own.
            traffic_token: record?.traffic_token ? await services.previews.rotateToken(vm.tenant_id, started.body.vm_ids[0]) : null,
            metadata: record?.metadata ?? {},
            env_vars: record?.env_vars ?? {},
            auto_pause: false,
            auto_pause_memory: true,
            end_at: end,
            created_at: now,
          };
          await store.insert(services.db, fork);
          await services.previews.setAllPortsPublic(fork.vm_id, await services.previews.allPortsPublic(vm.vm_id));
          if (vm.preview_host) await services.previews.setPreviewHost(fork.vm_id, vm.preview_host);
          const running = await services.vms.waitFor(vm.tenant_id, fork.vm_id, 'running', o.startWaitMs, c.req.raw.signal);
          if (running.status !== 'running') throw new E2bError(500, `the fork did not start: it is ${running.status}${running.status_reason ? ` (${running.status_reason})` : ''}`);
          results.push({ sandbox: o.created(running, fork) });
        } catch (err) {
          const known = e2bErrorOf(err);
          if (!known) log.error({ err: (err as Error).message, vm_id: vm.vm_id }, 'an e2b fork failed');
          results.push({ error: { code: known?.status ?? 500, message: known?.message ?? 'internal error' } });
        }
      }
    } finally {
      await services.snapshots.delete(vm.tenant_id, snap.snapshot_id).catch((err: Error) => log.warn({ err: err.message, snapshot_id: snap.snapshot_id }, "an e2b fork's snapshot could not be deleted"));
    }
    return c.json(results, 201);
  });
}
