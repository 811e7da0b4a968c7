/**
 * Preview state of VMs (migration 018): the hash of each VM's preview token, its public ports, and
 * the VM a preview's label names.
 */
import type { Queryable } from './db.ts';

/** What a preview request needs of the VM its label names. */
export interface PreviewTarget {
  vm_id: string;
  tenant_id: string;
  status: string;
  desired_state: string;
  auto_resume: boolean;
  /** The Host its apps get (`${PORT}` is the port), or null: the client's (migration 026). */
  preview_host: string | null;
}

const TARGET = 'vm_id, tenant_id, status, desired_state, auto_resume, preview_host';

/** The VMs (not deleted) whose label is `label` (more than one only for ids that differ in case alone). */
export function findByLabel(q: Queryable, label: string): Promise<PreviewTarget[]> {
  return q.query<PreviewTarget>(`SELECT ${TARGET} FROM vms WHERE lower(replace(vm_id, '_', '-')) = $1 AND deleted_at IS NULL LIMIT 2`, [label]);
}

export async function findById(q: Queryable, vmId: string): Promise<PreviewTarget | null> {
  const [row] = await q.query<PreviewTarget>(`SELECT ${TARGET} FROM vms WHERE vm_id = $1 AND deleted_at IS NULL`, [vmId]);
  return row ?? null;
}

export async function tokenHash(q: Queryable, vmId: string): Promise<string | null> {
  const [row] = await q.query<{ token_hash: string }>('SELECT token_hash FROM vm_preview_tokens WHERE vm_id = $1', [vmId]);
  return row?.token_hash ?? null;
}

/** Sets the VM's token (the old one dies with the write). */
export async function setTokenHash(q: Queryable, vmId: string, hash: string, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO vm_preview_tokens (vm_id, token_hash, created_at) VALUES ($1, $2, $3)
     ON CONFLICT (vm_id) DO UPDATE SET token_hash = EXCLUDED.token_hash, created_at = EXCLUDED.created_at`,
    [vmId, hash, now],
  );
}

export async function publicPorts(q: Queryable, vmId: string): Promise<number[]> {
  const rows = await q.query<{ port: number }>('SELECT port FROM vm_public_ports WHERE vm_id = $1 ORDER BY port', [vmId]);
  return rows.map((r) => Number(r.port));
}

/** Whether anyone may reach `port` of the VM: made public one by one, or every port of an E2B sandbox whose traffic is public. */
export async function isPublic(q: Queryable, vmId: string, port: number): Promise<boolean> {
  const [row] = await q.query<{ public: boolean }>(
    `SELECT (SELECT ports_public FROM vms WHERE vm_id = $1) OR EXISTS (SELECT 1 FROM vm_public_ports WHERE vm_id = $1 AND port = $2) AS public`,
    [vmId, port],
  );
  return row?.public === true;
}

/** Every port of the VM public (an E2B sandbox's allowPublicTraffic), or not. */
export async function setAllPublic(q: Queryable, vmId: string, on: boolean): Promise<void> {
  await q.query('UPDATE vms SET ports_public = $2 WHERE vm_id = $1', [vmId, on]);
}

export async function setPreviewHost(q: Queryable, vmId: string, host: string | null): Promise<void> {
  await q.query('UPDATE vms SET preview_host = $2 WHERE vm_id = $1', [vmId, host]);
}

export async function allPublic(q: Queryable, vmId: string): Promise<boolean> {
  const [row] = await q.query<{ ports_public: boolean }>('SELECT ports_public FROM vms WHERE vm_id = $1', [vmId]);
  return row?.ports_public === true;
}

export async function setPublic(q: Queryable, vmId: string, port: number, on: boolean, now: Date): Promise<void> {
  if (on) await q.query('INSERT INTO vm_public_ports (vm_id, port, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [vmId, port, now]);
  else await q.query('DELETE FROM vm_public_ports WHERE vm_id = $1 AND port = $2', [vmId, port]);
}

/** Sets whether a request to the suspended VM starts it. */
export async function setAutoResume(q: Queryable, tenantId: string, vmId: string, on: boolean): Promise<boolean> {
  const rows = await q.query<{ vm_id: string }>('UPDATE vms SET auto_resume = $3 WHERE tenant_id = $1 AND vm_id = $2 AND deleted_at IS NULL RETURNING vm_id', [tenantId, vmId, on]);
  return rows.length > 0;
}
