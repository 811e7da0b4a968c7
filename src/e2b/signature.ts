/**
 * E2B's signed file URLs (`sandbox.downloadUrl()`, `uploadUrl()`): a URL to a sandbox's `/files` that
 * carries no access token but a signature made with it, for a browser or another program to use
 * alone. The signature is `v1_` and the unpadded base64 of SHA-256 over
 * `path:operation:user:access token[:expiration]` (E2B's SDK makes it so: `path` and `username` as the
 * URL has them, empty when absent; `read` for a download, `write` for an upload; the expiration a unix
 * time in seconds, in `signature_expiration`). Only the token's holder can make one.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export function fileSignature(path: string, operation: 'read' | 'write', user: string, token: string, expiration: number | null): string {
  const raw = `${path}:${operation}:${user}:${token}${expiration === null ? '' : `:${expiration}`}`;
  return `v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`;
}

export type SignatureCheck = 'valid' | 'expired' | 'invalid';

/** Whether `url` (a `/files` request of `method`) is signed with `token`, and still in its time. */
export function checkSignature(url: URL, method: string, token: string, nowMs: number): SignatureCheck {
  const given = url.searchParams.get('signature') ?? '';
  const exp = url.searchParams.get('signature_expiration');
  const expiration = exp === null ? null : /^-?\d{1,15}$/.test(exp) ? Number(exp) : NaN;
  if (Number.isNaN(expiration)) return 'invalid';
  const operation = method === 'POST' ? 'write' : 'read';
  const want = Buffer.from(fileSignature(url.searchParams.get('path') ?? '', operation, url.searchParams.get('username') ?? '', token, expiration));
  const got = Buffer.from(given);
  if (got.length !== want.length || !timingSafeEqual(got, want)) return 'invalid';
  return expiration !== null && expiration * 1000 < nowMs ? 'expired' : 'valid';
}

/** A request that names its sandbox by nothing but its signature (E2B_SANDBOX_URL drops the path: the SDK makes `/files` of its origin). */
export const signedOnly = (url: URL) => url.pathname === '/files' && url.searchParams.has('signature');
