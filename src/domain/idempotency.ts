import { createHash } from 'node:crypto';
import type { Queryable } from '../store/db.ts';
import { DomainError } from './errors.ts';
import { lockTenant } from '../store/ledger.ts';

/** How long a key's first response is replayed. */
export const IDEMPOTENCY_TTL_HOURS = 24;

export interface StoredResponse<T> {
  status: number;
  body: T;
  replayed: boolean;
}

export function requestHash(operation: string, target: string, body: unknown): string {
  return createHash('sha256').update(JSON.stringify([operation, target, body ?? null])).digest('hex');
}

/**
 * Runs a money operation at most once per (tenant, Idempotency-Key), inside the caller's transaction.
 * The key's row is inserted first: a concurrent request with the same key waits on that row (its
 * primary key) until the first commits, then finds the stored response and replays it. A failed first
 * attempt rolls its row back with everything else, so a retry runs afresh. Another body under the same
 * key is 409 idempotency_conflict.
 */
export async function onceForKey<T>(
  tx: Queryable,
  tenantId: string,
  key: string | undefined,
  operation: string,
  hash: string,
  run: () => Promise<{ status: number; body: T }>,
): Promise<StoredResponse<T>> {
  if (key === undefined) return { ...(await run()), replayed: false };
  // The tenant first, as every money step locks it: the key row's foreign key would otherwise take a
  // share lock on the tenant that two concurrent requests each hold while waiting for the other's
  // update lock (a deadlock PostgreSQL showed under the chaos test).
  await lockTenant(tx, tenantId);
  await tx.query(
    `DELETE FROM idempotency_keys WHERE tenant_id = $1 AND idem_key = $2
       AND created_at < now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS})`,
    [tenantId, key],
  );
  const claimed = await tx.query(
    `INSERT INTO idempotency_keys (tenant_id, idem_key, operation, request_hash) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant_id, idem_key) DO NOTHING RETURNING idem_key`,
    [tenantId, key, operation, hash],
  );
  if (claimed.length === 0) {
    const [row] = await tx.query<{ operation: string; request_hash: string; status_code: number | null; response: T | null }>(
      'SELECT operation, request_hash, status_code, response FROM idempotency_keys WHERE tenant_id = $1 AND idem_key = $2',
      [tenantId, key],
    );
    if (!row || row.operation !== operation || row.request_hash !== hash) {
      throw new DomainError(
        'idempotency_conflict',
        'this Idempotency-Key was already used with another request',
        'use a new Idempotency-Key for a different request',
      );
    }
    if (row.status_code === null || row.response === null) {
      throw new DomainError('idempotency_conflict', 'a request with this Idempotency-Key is still in progress', 'retry in a moment');
    }
    return { status: row.status_code, body: row.response, replayed: true };
  }
  const result = await run();
  await tx.query('UPDATE idempotency_keys SET status_code = $3, response = $4 WHERE tenant_id = $1 AND idem_key = $2', [
    tenantId,
    key,
    result.status,
    JSON.stringify(result.body),
  ]);
  return { ...result, replayed: false };
}

/**
 * The stored answer of a money request already made under this key, looked at before work that must
 * not be done twice outside the transaction (a branch pauses its VM): null when the key is new. The
 * same key with another request is 409 idempotency_conflict. onceForKey still decides in the end.
 */
export async function storedForKey<T>(q: Queryable, tenantId: string, key: string | undefined, operation: string, hash: string): Promise<StoredResponse<T> | null> {
  if (key === undefined) return null;
  const [row] = await q.query<{ operation: string; request_hash: string; status_code: number | null; response: T | null; fresh: boolean }>(
    `SELECT operation, request_hash, status_code, response, created_at >= now() - make_interval(hours => ${IDEMPOTENCY_TTL_HOURS}) AS fresh
     FROM idempotency_keys WHERE tenant_id = $1 AND idem_key = $2`,
    [tenantId, key],
  );
  if (!row || !row.fresh) return null;
  if (row.operation !== operation || row.request_hash !== hash) {
    throw new DomainError('idempotency_conflict', 'this Idempotency-Key was already used with another request', 'use a new Idempotency-Key for a different request');
  }
  if (row.status_code === null || row.response === null) return null;
  return { status: row.status_code, body: row.response, replayed: true };
}
