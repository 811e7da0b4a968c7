/**
 * E2B's sandbox lists (decisions section 17): `GET /e2b/sandboxes` (the running ones) and
 * `GET /e2b/v2/sandboxes` with the filters E2B's SDKs send (state, metadata, template, startedAfter,
 * order) and pages (`limit`, `nextToken` answered in `x-next-token`).
 */
import type { Hono } from 'hono';
import type { Services } from '../domain/services.ts';
import type { VmRow } from '../domain/vms.ts';
import * as store from './store.ts';
import { e2bError } from './errors.ts';


export function listRoutes<E extends { Variables: { principal: { tenantId: string } } }, S extends { startedAt: string; templateID: string; metadata: Record<string, string> }>(
  app: Hono<E>,
  services: Services,
  o: { listed(vm: VmRow, r: store.SandboxRecord | null): S; state(vm: VmRow): 'running' | 'paused' },
): void {
  const { listed, state } = o;
  app.get('/sandboxes', async (c) => {
    const tenant = c.get('principal').tenantId;
    const records = await store.forTenant(services.db, tenant);
    const vms = (await services.vms.list(tenant)).filter((vm) => state(vm) === 'running' && vm.status !== 'failed');
    return c.json(vms.map((vm) => listed(vm, records.get(vm.vm_id) ?? null)));
  });

  app.get('/v2/sandboxes', async (c) => {
    const tenant = c.get('principal').tenantId;
    const records = await store.forTenant(services.db, tenant);
    const states = c.req.queries('state')?.flatMap((s) => s.split(',')) ?? ['running', 'paused'];
    // E2B's SDKs encode each key and value, then the pairs as a query string (E2B's API decodes both).
    let meta: [string, string][];
    try {
      meta = [...new URLSearchParams(c.req.query('metadata') ?? '').entries()].map(([k, v]) => [decodeURIComponent(k), decodeURIComponent(v)]);
    } catch {
      return e2bError(c, 400, 'metadata: each key and value URL-encoded');
    }
    const template = c.req.query('template');
    const after = c.req.query('startedAfter');
    const since = after === undefined ? null : new Date(after);
    if (since && Number.isNaN(since.getTime())) return e2bError(c, 400, 'startedAfter: an RFC 3339 time');
    const order = c.req.query('order') ?? 'desc';
    if (order !== 'asc' && order !== 'desc') return e2bError(c, 400, 'order: asc or desc');
    const limit = Math.min(Math.max(Number(c.req.query('limit') ?? 100) || 100, 1), 1000);
    const offset = Math.max(Number(c.req.query('nextToken') ?? 0) || 0, 0);
    const all = (await services.vms.list(tenant))
      .filter((vm) => vm.status !== 'failed' && states.includes(state(vm)))
      .map((vm) => listed(vm, records.get(vm.vm_id) ?? null))
      .filter((s) => meta.every(([k, v]) => s.metadata[k] === v))
      .filter((s) => (template === undefined || s.templateID === template) && (!since || new Date(s.startedAt) >= since))
      .sort((a, b) => (a.startedAt < b.startedAt ? 1 : -1) * (order === 'asc' ? -1 : 1));
    const page = all.slice(offset, offset + limit);
    if (offset + limit < all.length) c.header('x-next-token', String(offset + limit));
    return c.json(page);
  });
}
