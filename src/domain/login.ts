import { randomInt } from 'node:crypto';
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError } from './errors.ts';
import { newId, sha256Hex } from './ids.ts';
import type { KeyRecord, KeyService } from './keys.ts';

/** Sends a login code to an account email: SMTP when configured, else the server log. */
export interface Mailer {
  send(to: string, subject: string, text: string): Promise<void>;
}

export const LOGIN_CODE_TTL_MS = 10 * 60_000;
/** Codes sent per email in a window, wrong guesses per code, and wrong codes per email in an hour (section 14). */
const MAX_CODES_PER_WINDOW = 5;
const CODE_WINDOW_MS = 15 * 60_000;
const MAX_ATTEMPTS = 5;
export const MAX_WRONG_CODES_PER_HOUR = 10;
const WRONG_CODE_WINDOW_MS = 60 * 60_000;

const codeHash = (codeId: string, code: string) => sha256Hex(`${codeId}:${code}`);
/** An email as the attempts are counted by: known or not, the same way; only its hash is kept. */
const emailKey = (email: string) => sha256Hex(`login:${email.trim().toLowerCase()}`);

type AttemptKind = 'code_sent' | 'wrong_code';

/**
 * CLI and console sign-in by a one-time code sent to the account email. Nothing in the answers or their
 * timing tells whether an email has an account: codes sent and wrong codes are counted per email for
 * every email, and the mail goes out after the answer. Completing trades a fresh, unused, unexpired code
 * for what it was asked for (a new readwrite key, a console session).
 */
export class LoginService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly keys: KeyService,
    private readonly mailer: Mailer,
  ) {}

  /**
   * One email's attempts at a time (a lock on its hash for the transaction), and the seconds until the
   * email may try again when it has had `max` attempts of `kind` within `windowMs` (0: it may).
   */
  private async attempts(tx: Queryable, key: string, kind: AttemptKind, max: number, windowMs: number, now: Date): Promise<number> {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [key]);
    const [nth] = await tx.query<{ at: Date }>(
      'SELECT at FROM login_attempts WHERE email_hash = $1 AND kind = $2 AND at > $3 ORDER BY at DESC OFFSET $4 LIMIT 1',
      [key, kind, new Date(now.getTime() - windowMs), max - 1],
    );
    return nth ? Math.max(1, Math.ceil((new Date(nth.at).getTime() + windowMs - now.getTime()) / 1000)) : 0;
  }

  /** Records an attempt; rows past the longest window go as new ones come. */
  private async record(tx: Queryable, key: string, kind: AttemptKind, now: Date): Promise<void> {
    await tx.query('DELETE FROM login_attempts WHERE at <= $1', [new Date(now.getTime() - WRONG_CODE_WINDOW_MS)]);
    await tx.query('INSERT INTO login_attempts (email_hash, kind, at) VALUES ($1, $2, $3)', [key, kind, now]);
  }

  async start(email: string): Promise<{ expires_in_s: number }> {
    const now = this.clock.now();
    const key = emailKey(email);
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const sent = await this.db.transaction(async (tx) => {
      const wait = await this.attempts(tx, key, 'code_sent', MAX_CODES_PER_WINDOW, CODE_WINDOW_MS, now);
      if (wait > 0) {
        throw new DomainError('rate_limited', 'too many login codes were asked for this email', `wait ${Math.ceil(wait / 60)} minutes and try again`, {
          'Retry-After': String(wait),
        });
      }
      await this.record(tx, key, 'code_sent', now);
      const [tenant] = await tx.query<{ tenant_id: string }>('SELECT tenant_id FROM tenants WHERE lower(email) = lower($1) FOR NO KEY UPDATE', [email]);
      // Earlier codes of the account stop working: only the newest can be used. (Done for an unknown email
      // too, on no rows, so that both take the same statements' time.)
      await tx.query('UPDATE login_codes SET used_at = $2 WHERE tenant_id = $1 AND used_at IS NULL', [tenant?.tenant_id ?? '', now]);
      if (!tenant) return false;
      const codeId = newId('lc');
      await tx.query('INSERT INTO login_codes (code_id, tenant_id, code_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)', [
        codeId,
        tenant.tenant_id,
        codeHash(codeId, code),
        new Date(now.getTime() + LOGIN_CODE_TTL_MS),
        now,
      ]);
      return true;
    });
    // After the answer, not before it: a slow mail server must not tell which emails have an account.
    // (A failure is logged by the mailer; the caller could not be told without telling that.)
    if (sent) {
      this.mailer
        .send(email, 'Your agentvm login code', `Your agentvm login code is ${code}. It works once, for ${LOGIN_CODE_TTL_MS / 60_000} minutes.`)
        .catch(() => undefined);
    }
    return { expires_in_s: LOGIN_CODE_TTL_MS / 1000 };
  }

  async complete(email: string, code: string, label: string): Promise<{ key: string; record: KeyRecord }> {
    return this.redeem(email, code, (tx, tenantId) => this.keys.issue(tx, tenantId, { label, scope: 'readwrite' }));
  }

  /**
   * Spends an email's newest code and, in the same transaction, grants what it was traded for (a CLI key,
   * a console session). A wrong guess counts against the code (five spend it) and against the email: after
   * ten wrong codes in an hour, every code for it is refused (429) until the hour has passed, the right one
   * too. A wrong, used or expired code, or an email with no account, is 401.
   */
  async redeem<T>(email: string, code: string, grant: (tx: Queryable, tenantId: string) => Promise<T>): Promise<T> {
    const now = this.clock.now();
    const key = emailKey(email);
    const outcome = await this.db.transaction(async (tx) => {
      const wait = await this.attempts(tx, key, 'wrong_code', MAX_WRONG_CODES_PER_HOUR, WRONG_CODE_WINDOW_MS, now);
      if (wait > 0) return { refused: true as const, wait };
      const [row] = await tx.query<{ code_id: string; tenant_id: string; code_hash: string; attempts: number }>(
        `SELECT c.code_id, c.tenant_id, c.code_hash, c.attempts FROM login_codes c JOIN tenants t ON t.tenant_id = c.tenant_id
         WHERE lower(t.email) = lower($1) AND c.used_at IS NULL AND c.expires_at > $2
         ORDER BY c.created_at DESC LIMIT 1 FOR UPDATE OF c`,
        [email, now],
      );
      if (!row || codeHash(row.code_id, code) !== row.code_hash) {
        if (row) {
          // A wrong guess counts; enough of them spend the code.
          await tx.query('UPDATE login_codes SET attempts = attempts + 1, used_at = CASE WHEN attempts + 1 >= $2::int THEN $3::timestamptz ELSE NULL END WHERE code_id = $1', [
            row.code_id,
            MAX_ATTEMPTS,
            now,
          ]);
        }
        await this.record(tx, key, 'wrong_code', now);
        return null;
      }
      await tx.query('UPDATE login_codes SET used_at = $2 WHERE code_id = $1', [row.code_id, now]);
      return { refused: false as const, granted: await grant(tx, row.tenant_id) };
    });
    if (!outcome) throw new DomainError('unauthorized', 'the code is wrong, used or expired', 'ask for a new code and use the newest one');
    if (outcome.refused) {
      const minutes = Math.ceil(outcome.wait / 60);
      throw new DomainError('rate_limited', `too many wrong codes for this email in the last hour`, `try again in ${minutes} minute${minutes === 1 ? '' : 's'}`, {
        'Retry-After': String(outcome.wait),
      });
    }
    return outcome.granted;
  }
}
