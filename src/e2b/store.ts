/**
 * E2B's side of a sandbox (migrations 020, 023, 025): the template it was asked for, its access tokens, metadata,
 * envs, what its timeout does, and when that is.
 */
import type { Queryable } from '../store/db.ts';
import { byLabel } from '../store/vms.ts';

/** E2B's default sandbox timeout (seconds), and its longest. */
export const DEFAULT_TIMEOUT_S = 300;
export const MAX_TIMEOUT_S = 24 * 3600;

export interface SandboxRecord {
  vm_id: string;
  tenant_id: string;
  template_id: string;
  access_token: string;
  /** E2B's trafficAccessToken of a sandbox made with allowPublicTraffic false: the VM's preview token (section 16). */
  traffic_token: string | null;
  metadata: Record<string, string>;
  env_vars: Record<string, string>;
  auto_pause: boolean;
  /** Whether that pause keeps the memory (a suspend) or the filesystem only (a stop: the resume boots). */
  auto_pause_memory: boolean;
  end_at: Date;
  created_at: Date;
}

const COLUMNS = 'vm_id, tenant_id, template_id, access_token, traffic_token, metadata, env_vars, auto_pause, auto_pause_memory, end_at, created_at';

const parsed = (r: SandboxRecord): SandboxRecord => ({
  ...r,
  metadata: typeof r.metadata === 'string' ? JSON.parse(r.metadata) : r.metadata ?? {},
  env_vars: typeof r.env_vars === 'string' ? JSON.parse(r.env_vars) : r.env_vars ?? {},
});

export async function insert(q: Queryable, r: SandboxRecord): Promise<void> {
  await q.query(
    `INSERT INTO e2b_sandboxes (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [r.vm_id, r.tenant_id, r.template_id, r.access_token, r.traffic_token, JSON.stringify(r.metadata), JSON.stringify(r.env_vars), r.auto_pause, r.auto_pause_memory, r.end_at, r.created_at],
  );
}

export async function get(q: Queryable, vmId: string): Promise<SandboxRecord | null> {
  const [row] = await q.query<SandboxRecord>(`SELECT ${COLUMNS} FROM e2b_sandboxes WHERE vm_id = $1`, [vmId]);
  return row ? parsed(row) : null;
}

export async function forTenant(q: Queryable, tenantId: string): Promise<Map<string, SandboxRecord>> {
  const rows = await q.query<SandboxRecord>(`SELECT ${COLUMNS} FROM e2b_sandboxes WHERE tenant_id = $1`, [tenantId]);
  return new Map(rows.map((r) => [r.vm_id, parsed(r)]));
}

/** The VM (not deleted) whose label is the sandbox id, if it is the tenant's. */
export async function vmIdOfSandbox(q: Queryable, tenantId: string | null, sandboxId: string): Promise<{ vm_id: string; tenant_id: string } | null> {
  return /^[a-z0-9][a-z0-9-]{0,70}$/.test(sandboxId) ? byLabel(q, sandboxId, tenantId) : null;
}

/**
 * The sandbox (not deleted) whose access token `signedWith` accepts, for a signed file URL that names
 * no sandbox: each token is tried (a hash each; a signature made with another token matches none).
 */
export async function sandboxSigning(q: Queryable, signedWith: (token: string) => boolean): Promise<{ vm_id: string; tenant_id: string } | null> {
  const rows = await q.query<{ vm_id: string; tenant_id: string; access_token: string }>(
    `SELECT s.vm_id, v.tenant_id, s.access_token FROM e2b_sandboxes s JOIN vms v ON v.vm_id = s.vm_id WHERE v.deleted_at IS NULL`,
  );
  const found = rows.find((r) => signedWith(r.access_token));
  return found ? { vm_id: found.vm_id, tenant_id: found.tenant_id } : null;
}

export async function setEnd(q: Queryable, vmId: string, endAt: Date): Promise<void> {
  await q.query('UPDATE e2b_sandboxes SET end_at = $2 WHERE vm_id = $1', [vmId, endAt]);
}

/**
 * Sandboxes woken after their end (a request to the preview, `auto_resume`; a start through agentvm's
 * API) get a new end, `DEFAULT_TIMEOUT_S` from their wake, as a resume that names no timeout: the pause
 * sweep does not pause them again.
 */
export async function renewWoken(q: Queryable, now: Date): Promise<void> {
  await q.query(
    `UPDATE e2b_sandboxes s SET end_at = v.running_since + make_interval(secs => $2) FROM vms v
     WHERE v.vm_id = s.vm_id AND s.auto_pause AND s.end_at <= $1 AND v.deleted_at IS NULL AND v.status = 'running' AND v.running_since > s.end_at`,
    [now, DEFAULT_TIMEOUT_S],
  );
}

/** Sandboxes whose timeout has come that pause (not die) at it, and are not yet paused. */
export function duePauses(q: Queryable, now: Date): Promise<{ vm_id: string; tenant_id: string; auto_pause_memory: boolean }[]> {
  return q.query(
    `SELECT s.vm_id, s.tenant_id, s.auto_pause_memory FROM e2b_sandboxes s JOIN vms v ON v.vm_id = s.vm_id
     WHERE s.auto_pause AND s.end_at <= $1 AND v.deleted_at IS NULL AND v.status = 'running' LIMIT 100`,
    [now],
  );
}
