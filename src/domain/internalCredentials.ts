import { randomBytes } from 'node:crypto';
import type { Db } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { randomBase62, sha256Hex } from './ids.ts';
import * as store from '../store/internalCredentials.ts';
import type { CredentialRow, HolderKind } from '../store/internalCredentials.ts';

export type { CredentialRow, HolderKind };

export const INTERNAL_CREDENTIAL_PREFIX = 'avm_int_';
/** How long a host trusts what it looked up of a credential: a revocation reaches every host within this. */
export const CREDENTIAL_CACHE_MS = 500;
const CACHE_MAX = 1000;

export interface CredentialHolder {
  kind: HolderKind;
  holderId: string;
}

/**
 * The credentials of the internal endpoint between API replicas and VM hosts. Each process is issued one
 * when it registers (at its start), kept in its memory only; the database keeps its SHA-256. A host takes
 * calls made with a live replica credential, and answers with its own for the replica to check. The
 * operator revokes a holder's credential; the holder's next start issues it a new one.
 */
export class InternalCredentials {
  private readonly cache = new Map<string, { holder: CredentialHolder | null; until: number }>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Registers the holder: a new credential (its plaintext, answered only here); its earlier one is revoked. */
  async issue(kind: HolderKind, holderId: string): Promise<string> {
    const secret = `${INTERNAL_CREDENTIAL_PREFIX}${randomBase62(43)}`;
    await this.db.transaction((tx) =>
      store.replace(tx, {
        credential_id: `icr_${randomBytes(12).toString('hex')}`,
        holder_kind: kind,
        holder_id: holderId,
        secret_hash: sha256Hex(secret),
        created_at: this.clock.now(),
      }),
    );
    return secret;
  }

  /** The holder of a live credential, or null (cached for CREDENTIAL_CACHE_MS, refusals too). */
  async verify(token: string): Promise<CredentialHolder | null> {
    if (!token.startsWith(INTERNAL_CREDENTIAL_PREFIX) || token.length > 200) return null;
    const hash = sha256Hex(token);
    const now = this.clock.now().getTime();
    const hit = this.cache.get(hash);
    if (hit && hit.until > now) return hit.holder;
    const row = await store.findLive(this.db, hash);
    const holder = row ? { kind: row.holder_kind, holderId: row.holder_id } : null;
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(hash, { holder, until: now + CREDENTIAL_CACHE_MS });
    return holder;
  }

  /** Revokes the holder's live credential: answers it, or null when the holder has none. */
  async revoke(kind: HolderKind, holderId: string): Promise<CredentialRow | null> {
    const row = await store.revoke(this.db, kind, holderId, this.clock.now());
    this.cache.clear();
    return row ?? null;
  }

  /** Every holder's newest credential (never its secret). */
  list(): Promise<CredentialRow[]> {
    return store.listNewest(this.db);
  }
}
