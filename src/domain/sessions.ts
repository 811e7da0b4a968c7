import { randomBytes } from 'node:crypto';
import type { Db } from '../store/db.ts';
import * as sessionStore from '../store/sessions.ts';
import type { Clock } from './clock.ts';
import { newId, sha256Hex } from './ids.ts';
import type { LoginService } from './login.ts';
import type { Principal } from './keys.ts';

/** How long a console sign-in lasts; then the customer signs in again. */
export const SESSION_TTL_MS = 12 * 60 * 60_000;

export interface ConsoleSession {
  sessionId: string;
  csrfToken: string;
  expiresAt: Date;
  /** Who the session acts as: the tenant, with readwrite rights, rate-limited as a key of its own. */
  principal: Principal;
}

const token = () => randomBytes(32).toString('base64url');

/**
 * Web console sessions: a login code (the CLI's) traded for a session instead of an API key. The cookie
 * holds a random token; the database only its hash. A session expires after SESSION_TTL_MS or when signed out.
 */
export class SessionService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly login: LoginService,
  ) {}

  /** Trades an email's login code for a new session; a wrong, used or expired code is 401 as for the CLI. */
  async signIn(email: string, code: string): Promise<{ token: string; session: ConsoleSession }> {
    const plaintext = token();
    const row = await this.login.redeem(email, code, async (tx, tenantId) => {
      const now = this.clock.now();
      const created = {
        session_id: newId('ses'),
        tenant_id: tenantId,
        token_hash: sha256Hex(plaintext),
        csrf_token: token(),
        created_at: now,
        expires_at: new Date(now.getTime() + SESSION_TTL_MS),
      };
      await sessionStore.insert(tx, created);
      return created;
    });
    const [tenant] = await this.db.query<{ email: string }>('SELECT email FROM tenants WHERE tenant_id = $1', [row.tenant_id]);
    return { token: plaintext, session: toSession({ ...row, email: tenant.email }) };
  }

  /** The live session a cookie's token names, or null. */
  async resolve(plaintext: string): Promise<ConsoleSession | null> {
    if (plaintext.length < 20 || plaintext.length > 100) return null;
    const row = await sessionStore.findLive(this.db, sha256Hex(plaintext), this.clock.now());
    return row ? toSession(row) : null;
  }

  signOut(session: ConsoleSession): Promise<void> {
    return sessionStore.revoke(this.db, session.principal.tenantId, session.sessionId, this.clock.now());
  }
}

function toSession(row: { session_id: string; tenant_id: string; email: string; csrf_token: string; expires_at: Date }): ConsoleSession {
  return {
    sessionId: row.session_id,
    csrfToken: row.csrf_token,
    expiresAt: row.expires_at,
    principal: { tenantId: row.tenant_id, email: row.email, keyId: row.session_id, scope: 'readwrite', label: 'web console' },
  };
}
