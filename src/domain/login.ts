import { randomInt } from 'node:crypto';
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { ApiError } from './errors.ts';
import { newId, sha256Hex } from './ids.ts';
import type { KeyRecord, KeyService } from './keys.ts';

/** Sends a login code to an account email: SMTP when configured, else the server log. */
export interface Mailer {
  send(to: string, subject: string, text: string): Promise<void>;
}

export const LOGIN_CODE_TTL_MS = 10 * 60_000;
/** Codes per account in a window, and wrong guesses per code. */
const MAX_CODES_PER_WINDOW = 5;
const CODE_WINDOW_MS = 15 * 60_000;
const MAX_ATTEMPTS = 5;

const codeHash = (codeId: string, code: string) => sha256Hex(`${codeId}:${code}`);

/**
 * CLI login by a one-time code sent to the account email. Starting never tells whether an email has
 * an account; completing trades a fresh, unused, unexpired code for a new readwrite key.
 */
export class LoginService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly keys: KeyService,
    private readonly mailer: Mailer,
  ) {}

  async start(email: string): Promise<{ expires_in_s: number }> {
    const now = this.clock.now();
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const sent = await this.db.transaction(async (tx) => {
      const [tenant] = await tx.query<{ tenant_id: string }>('SELECT tenant_id FROM tenants WHERE lower(email) = lower($1) FOR UPDATE', [email]);
      if (!tenant) return false;
      const [recent] = await tx.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM login_codes WHERE tenant_id = $1 AND created_at > $2',
        [tenant.tenant_id, new Date(now.getTime() - CODE_WINDOW_MS)],
      );
      if (recent.n >= MAX_CODES_PER_WINDOW) {
        throw new ApiError('rate_limited', 'too many login codes were asked for this account', 'wait a few minutes and try again', {
          'Retry-After': String(CODE_WINDOW_MS / 1000),
        });
      }
      const codeId = newId('lc');
      // Earlier codes of the account stop working: only the newest can be used.
      await tx.query('UPDATE login_codes SET used_at = $2 WHERE tenant_id = $1 AND used_at IS NULL', [tenant.tenant_id, now]);
      await tx.query('INSERT INTO login_codes (code_id, tenant_id, code_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)', [
        codeId,
        tenant.tenant_id,
        codeHash(codeId, code),
        new Date(now.getTime() + LOGIN_CODE_TTL_MS),
        now,
      ]);
      return true;
    });
    if (sent) {
      await this.mailer.send(email, 'Your agentvm login code', `Your agentvm login code is ${code}. It works once, for ${LOGIN_CODE_TTL_MS / 60_000} minutes.`);
    }
    return { expires_in_s: LOGIN_CODE_TTL_MS / 1000 };
  }

  async complete(email: string, code: string, label: string): Promise<{ key: string; record: KeyRecord }> {
    return this.redeem(email, code, (tx, tenantId) => this.keys.issue(tx, tenantId, { label, scope: 'readwrite' }));
  }

  /**
   * Spends an email's newest code and, in the same transaction, grants what it was traded for (a CLI key,
   * a console session). A wrong guess counts against the code; a wrong, used or expired code is 401.
   */
  async redeem<T>(email: string, code: string, grant: (tx: Queryable, tenantId: string) => Promise<T>): Promise<T> {
    const now = this.clock.now();
    const outcome = await this.db.transaction(async (tx) => {
      const [row] = await tx.query<{ code_id: string; tenant_id: string; code_hash: string; attempts: number }>(
        `SELECT c.code_id, c.tenant_id, c.code_hash, c.attempts FROM login_codes c JOIN tenants t ON t.tenant_id = c.tenant_id
         WHERE lower(t.email) = lower($1) AND c.used_at IS NULL AND c.expires_at > $2
         ORDER BY c.created_at DESC LIMIT 1 FOR UPDATE OF c`,
        [email, now],
      );
      if (!row) return null;
      if (codeHash(row.code_id, code) !== row.code_hash) {
        // A wrong guess counts; enough of them spend the code.
        await tx.query('UPDATE login_codes SET attempts = attempts + 1, used_at = CASE WHEN attempts + 1 >= $2::int THEN $3::timestamptz ELSE NULL END WHERE code_id = $1', [
          row.code_id,
          MAX_ATTEMPTS,
          now,
        ]);
        return null;
      }
      await tx.query('UPDATE login_codes SET used_at = $2 WHERE code_id = $1', [row.code_id, now]);
      return { granted: await grant(tx, row.tenant_id) };
    });
    if (!outcome) throw new ApiError('unauthorized', 'the code is wrong, used or expired', 'ask for a new code and use the newest one');
    return outcome.granted;
  }
}
