import { timingSafeEqual, randomBytes } from 'node:crypto';
import type { Context } from 'hono';

/** The session cookie: scoped to the console's paths, never readable by scripts. */
export const SESSION_COOKIE = 'avm_session';
/** Before sign-in, a random value in a cookie and in the form (double submit) guards the login forms. */
export const LOGIN_CSRF_COOKIE = 'avm_login_csrf';
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

/**
 * Scripts only from this origin and no inline script or style (so no inline handler can run, whatever a tenant
 * typed), no framing, forms only back here. `connect-src 'self'` covers the terminal's WebSocket too: in CSP 3
 * 'self' matches ws: and wss: on this host and port.
 *
 * `styleNonce`: one page (the terminal) lets `<style>` elements that carry this response's nonce apply. xterm.js
 * creates three of them as it opens (its renderer's sizes and colours); the page's script gives them the nonce.
 * A nonce is random per response, so markup that a tenant typed can never carry it.
 */
export function contentSecurityPolicy(opts: { styleNonce?: string } = {}): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    opts.styleNonce ? `style-src 'self' 'nonce-${opts.styleNonce}'` : "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}
export const CONTENT_SECURITY_POLICY = contentSecurityPolicy();

export const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** Served over HTTPS: directly, or behind a proxy that says so. */
export function isHttps(c: Context): boolean {
  const forwarded = c.req.header('x-forwarded-proto')?.split(',')[0].trim().toLowerCase();
  return forwarded === 'https' || new URL(c.req.url).protocol === 'https:';
}

export function cookieOptions(c: Context, maxAgeSeconds: number) {
  return { path: '/console', httpOnly: true, sameSite: 'Lax' as const, secure: isHttps(c), maxAge: maxAgeSeconds };
}

export const newCsrfValue = () => randomBytes(24).toString('base64url');
/** A CSP nonce for one response: 128 random bits. */
export const newNonce = () => randomBytes(16).toString('base64');

/** Constant-time comparison of a submitted token with the expected one. */
export function tokensMatch(submitted: string | undefined, expected: string): boolean {
  if (!submitted) return false;
  const a = Buffer.from(submitted);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Whether a state-changing request comes from a page of this console. Browsers say where a request comes
 * from (Sec-Fetch-Site, Origin); anything that says "another site" is refused. A client that sends neither
 * still has to present the CSRF token.
 */
export function crossSiteReason(c: Context): string | null {
  const site = c.req.header('sec-fetch-site');
  if (site && site !== 'same-origin') return `the request came from another site (Sec-Fetch-Site: ${site})`;
  const origin = c.req.header('origin');
  if (origin !== undefined) {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return 'the request came from an unknown origin';
    }
    const hosts = [c.req.header('host'), c.req.header('x-forwarded-host')?.split(',')[0].trim(), new URL(c.req.url).host];
    if (!hosts.includes(host)) return `the request came from another origin (${origin})`;
  }
  return null;
}

export const isStateChange = (method: string) => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';
