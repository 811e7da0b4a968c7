import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { randomBytes } from 'node:crypto';
import { newApiKey, newId, sha256Hex, KEY_PREFIX } from './ids.ts';
import { recordKeyIssued, recordKeyRevoked } from './events.ts';
import { requireQuota } from './limits.ts';

export type Scope = 'read' | 'readwrite';
/** How a key is spelled: agentvm's `avm_live_…`, or E2B's `e2b_` and 40 hex digits (decisions section 17). */
export type KeyFormat = 'agentvm' | 'e2b';

const E2B_KEY = /^e2b_[0-9a-f]{40}$/;
/** Whether `s` is spelled as one of our API keys (either format): a credential of ours, never an app's. */
export const looksLikeApiKey = (s: string) => s.startsWith(KEY_PREFIX) || E2B_KEY.test(s);
const newE2bKey = () => `e2b_${randomBytes(20).toString('hex')}`;

export interface KeyRecord {
  key_id: string;
  label: string | null;
  scope: Scope;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** Who is calling: resolved from a bearer key. */
export interface Principal {
  tenantId: string;
  email: string;
  keyId: string;
  scope: Scope;
  label: string | null;
}

const KEY_COLUMNS = 'key_id, label, scope, prefix, created_at, last_used_at, revoked_at';
/** How long a resolved key is trusted without asking the database: revocation reaches every process within this. */
export const AUTH_CACHE_MS = 500;
/** last_used_at is written at most this often per key, so that reads stay reads. */
const LAST_USED_WRITE_MS = 10_000;
const AUTH_CACHE_MAX = 10_000;

export class KeyService {
  private readonly cache = new Map<string, { principal: Principal | null; until: number }>();
  private readonly lastUsedWritten = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Issues a key in `tx` (its key.issued event with it); without one, in a transaction of its own. */
  async issue(
    tx: Queryable | null,
    tenantId: string,
    opts: { label?: string | null; scope: Scope; format?: KeyFormat },
  ): Promise<{ key: string; record: KeyRecord }> {
    if (!tx) return this.db.transaction((t) => this.issue(t, tenantId, opts));
    const key = opts.format === 'e2b' ? newE2bKey() : newApiKey();
    const now = this.clock.now();
    await requireQuota(tx, tenantId, { api_keys: 1 }, now);
    const [record] = await tx.query<KeyRecord>(
      `INSERT INTO api_keys (key_id, tenant_id, key_hash, prefix, label, scope, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${KEY_COLUMNS}`,
      [newId('key'), tenantId, sha256Hex(key), key.slice(0, 12), opts.label ?? null, opts.scope, now],
    );
    await recordKeyIssued(tx, tenantId, record, now);
    return { key, record };
  }

  list(tenantId: string): Promise<KeyRecord[]> {
    return this.db.query<KeyRecord>(
      `SELECT ${KEY_COLUMNS} FROM api_keys WHERE tenant_id = $1 ORDER BY created_at DESC, key_id`,
      [tenantId],
    );
  }

  /** Revokes a key of the tenant; revoking it again keeps the first revocation time. */
  async revoke(tenantId: string, keyId: string): Promise<KeyRecord | null> {
    const now = this.clock.now();
    const record = await this.db.transaction(async (tx) => {
      const [before] = await tx.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM api_keys WHERE tenant_id = $1 AND key_id = $2 FOR UPDATE', [
        tenantId,
        keyId,
      ]);
      if (!before) return undefined;
      const [row] = await tx.query<KeyRecord & { key_hash: string }>(
        `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3)
         WHERE tenant_id = $1 AND key_id = $2 RETURNING ${KEY_COLUMNS}, key_hash`,
        [tenantId, keyId, now],
      );
      if (!before.revoked_at) await recordKeyRevoked(tx, tenantId, row, now);
      return row;
    });
    if (!record) return null;
    this.cache.delete(record.key_hash);
    const { key_hash: _hash, ...rest } = record;
    return rest;
  }

  /** Resolves a bearer key to its principal, or null for a malformed, unknown or revoked key. */
  async authenticate(plaintext: string): Promise<Principal | null> {
    const ours = plaintext.startsWith(KEY_PREFIX) && plaintext.length >= KEY_PREFIX.length + 32 && plaintext.length <= 200;
    if (!ours && !E2B_KEY.test(plaintext)) return null;
    const hash = sha256Hex(plaintext);
    const nowMs = this.clock.now().getTime();
    const hit = this.cache.get(hash);
    let principal: Principal | null;
    if (hit && hit.until > nowMs) {
      principal = hit.principal;
    } else {
      const [row] = await this.db.query<{ key_id: string; tenant_id: string; email: string; scope: Scope; label: string | null }>(
        `SELECT k.key_id, k.tenant_id, t.email, k.scope, k.label
         FROM api_keys k JOIN tenants t ON t.tenant_id = k.tenant_id
         WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
        [hash],
      );
      principal = row
        ? { tenantId: row.tenant_id, email: row.email, keyId: row.key_id, scope: row.scope, label: row.label }
        : null;
      if (this.cache.size >= AUTH_CACHE_MAX) this.cache.clear();
      this.cache.set(hash, { principal, until: nowMs + AUTH_CACHE_MS });
    }
    if (principal && this.touchDue(principal, nowMs)) await this.touch(principal, nowMs);
    return principal;
  }

  /** Whether last_used_at is due a write (at most every LAST_USED_WRITE_MS per key); the hot path stays synchronous. */
  private touchDue(principal: Principal, nowMs: number): boolean {
    const last = this.lastUsedWritten.get(principal.keyId);
    return last === undefined || nowMs - last >= LAST_USED_WRITE_MS;
  }

  private async touch(principal: Principal, nowMs: number): Promise<void> {
    this.lastUsedWritten.set(principal.keyId, nowMs);
    await this.db.query('UPDATE api_keys SET last_used_at = $2 WHERE key_id = $1 AND tenant_id = $3', [
      principal.keyId,
      new Date(nowMs),
      principal.tenantId,
    ]);
  }
}
