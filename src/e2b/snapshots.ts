/**
 * E2B's snapshots on agentvm's (decisions section 18): `sandbox.createSnapshot()` is a snapshot of the
 * VM (memory, devices and disks; the sandbox runs on), `Sandbox.listSnapshots()` lists the tenant's,
 * `Sandbox.deleteSnapshot(id)` deletes one (E2B deletes it as a template), and `Sandbox.create(id)`
 * starts a sandbox from one (controlPlane.ts: money like a create, as createVMFromSnapshot). A
 * snapshot's id is agentvm's (`snap_…`), its one name the name it was given.
 */
import type { Context, Hono } from 'hono';
import type { Services } from '../domain/services.ts';
import type { VmRow } from '../domain/vms.ts';
import type { Snapshot } from '../domain/snapshots.ts';
import { E2bError } from './errors.ts';
import * as store from './store.ts';

export const isSnapshotId = (templateId: string) => /^snap_[A-Za-z0-9]{1,40}$/.test(templateId);

const info = (s: Snapshot) => ({ snapshotID: s.snapshot_id, names: [s.name] });

export function snapshotRoutes<E extends { Variables: { principal: { tenantId: string } } }>(
  app: Hono<E>,
  services: Services,
  o: { vmOf(c: Context<E>): Promise<{ vm: VmRow }>; writable(c: Context<E>): void },
): void {
  app.post('/sandboxes/:sandboxID/snapshots', async (c) => {
    o.writable(c);
    const { vm } = await o.vmOf(c);
    const body = (await c.req.json().catch(() => ({}))) as { name?: unknown } | null;
    const name = body?.name;
    if (name !== undefined && (typeof name !== 'string' || name.length === 0 || name.length > 100)) throw new E2bError(400, 'name: a string of 1 to 100 characters');
    const snap = await services.snapshots.create(vm.tenant_id, vm.vm_id, { name: name as string | undefined });
    return c.json(info(snap), 201);
  });

  app.get('/snapshots', async (c) => {
    const tenantId = c.get('principal').tenantId;
    const limit = Math.min(Math.max(Number(c.req.query('limit') ?? 100) || 100, 1), 100);
    const sandbox = c.req.query('sandboxID');
    let vmId: string | undefined;
    if (sandbox) {
      const found = await store.vmIdOfSandbox(services.db, tenantId, sandbox.toLowerCase());
      if (!found) return c.json([]);
      vmId = found.vm_id;
    }
    const name = c.req.query('name');
    // A name filter reads the tenant's snapshots page by page until a page of matches is found.
    const out: Snapshot[] = [];
    let cursor = c.req.query('nextToken') || undefined;
    let next: string | undefined;
    pages: for (;;) {
      const page = await services.snapshots.list(tenantId, 100, cursor, vmId).catch((err: { code?: string }) => {
        throw err.code === 'invalid_request' ? new E2bError(400, 'nextToken: not a token of this list') : err;
      });
      for (const s of page.data) {
        if (name && s.name !== name && s.snapshot_id !== name) {
          cursor = s.snapshot_id;
          continue;
        }
        if (out.length === limit) {
          next = out[out.length - 1].snapshot_id;
          break pages;
        }
        out.push(s);
        cursor = s.snapshot_id;
      }
      if (!page.has_more) break;
    }
    if (next) c.header('x-next-token', next);
    return c.json(out.map(info));
  });

  app.delete('/templates/:templateID', async (c) => {
    o.writable(c);
    const id = c.req.param('templateID');
    if (!isSnapshotId(id)) throw new E2bError(404, `template "${id.slice(0, 80)}" not found: templates are agentvm's images and harnesses (delete images with agentvm's API)`);
    await services.snapshots.delete(c.get('principal').tenantId, id);
    return c.body(null, 204);
  });
}
