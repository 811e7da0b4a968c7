/**
 * The `console_sessions` table: one row per web console sign-in. Only a hash of the cookie's token is kept;
 * the tenant id is in every WHERE that is not a lookup by that hash.
 */
import type { Queryable } from './db.ts';

export interface SessionRow {
  session_id: string;
  tenant_id: string;
  email: string;
  csrf_token: string;
  created_at: Date;
  expires_at: Date;
}

export async function insert(
  q: Queryable,
  row: { session_id: string; tenant_id: string; token_hash: string; csrf_token: string; created_at: Date; expires_at: Date },
): Promise<void> {
  await q.query(
    `INSERT INTO console_sessions (session_id, tenant_id, token_hash, csrf_token, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [row.session_id, row.tenant_id, row.token_hash, row.csrf_token, row.created_at, row.expires_at],
  );
}

/** The live session whose token hashes to `tokenHash`: not signed out, not expired. */
export async function findLive(q: Queryable, tokenHash: string, now: Date): Promise<SessionRow | null> {
  const [row] = await q.query<SessionRow>(
    `SELECT s.session_id, s.tenant_id, t.email, s.csrf_token, s.created_at, s.expires_at
     FROM console_sessions s JOIN tenants t ON t.tenant_id = s.tenant_id
     WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > $2`,
    [tokenHash, now],
  );
  return row ?? null;
}

/** Signs a session out; signing out again keeps the first time. */
export async function revoke(q: Queryable, tenantId: string, sessionId: string, now: Date): Promise<void> {
  await q.query('UPDATE console_sessions SET revoked_at = coalesce(revoked_at, $3) WHERE tenant_id = $1 AND session_id = $2', [
    tenantId,
    sessionId,
    now,
  ]);
}
