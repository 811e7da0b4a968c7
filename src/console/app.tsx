import { Hono, type Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import type { Services } from '../domain/services.ts';
import type { ConsoleSession } from '../domain/sessions.ts';
import { SESSION_TTL_MS } from '../domain/sessions.ts';
import type { Logger } from '../log.ts';
import { ClientError, consoleApi, type ApiClient, type CallApi } from './api.ts';
import { assets } from './assets.ts';
import { page } from './layout.tsx';
import {
  cookieOptions,
  CSRF_FIELD,
  CSRF_HEADER,
  crossSiteReason,
  isStateChange,
  SECURITY_HEADERS,
  SESSION_COOKIE,
  tokensMatch,
} from './security.ts';
import { registerLogin } from './pages/login.tsx';
import { capBody, MAX_BODY_BYTES } from '../http/bodyLimit.ts';
import { clientAddress, type FailureThrottle } from '../throttle.ts';
import { registerVms } from './pages/vms.tsx';
import { registerVm } from './pages/vm.tsx';
import { registerRun } from './pages/run.tsx';
import { registerImages } from './pages/images.tsx';
import { registerSnapshotsPage } from './pages/snapshots.tsx';
import { registerTemplates } from './pages/templates.tsx';
import { registerBilling } from './pages/billing.tsx';
import { registerKeys } from './pages/keys.tsx';
import { registerEvents } from './pages/events.tsx';
import { registerWebhooks } from './pages/webhooks.tsx';
import { registerWebhookDelete } from './pages/webhookDelete.tsx';
import { registerDeliveries } from './pages/deliveries.tsx';
import { registerLedger } from './pages/ledger.tsx';

export type ConsoleEnv = { Variables: { session: ConsoleSession; api: ApiClient; requestId: string; principal: unknown } };
export type ConsoleApp = Hono<ConsoleEnv>;
export type ConsoleContext = Context<ConsoleEnv>;
export interface ConsoleDeps {
  services: Services;
  log: Logger;
  callApi: CallApi;
  /** Failed authentications per client address, shared with the API: wrong codes and dead session cookies count. */
  throttle: FailureThrottle;
}

/** A form's text field, trimmed; absent → ''. */
export async function field(c: Context, name: string): Promise<string> {
  const form = await c.req.parseBody();
  const v = form[name];
  return typeof v === 'string' ? v.trim() : '';
}

/** Where to go back to after sign-in: a console path, never another site. */
export function safeNext(next: string | undefined): string {
  return next && /^\/console(\/[A-Za-z0-9_\-/?=&.%]*)?$/.test(next) && !next.startsWith('//') ? next : '/console/vms';
}

/** A page that says what went wrong, with the API's words when there are some. */
function problemPage(c: Context, status: number, title: string, problem: ClientError, session?: ConsoleSession) {
  return page(c, { title, session, problem, status }, <p><a href="/console/vms">Back to your VMs</a></p>);
}

/**
 * The web console, mounted at /console on the API's own server. Pages are rendered here; every read and
 * change goes through the API's operations in process as the signed-in tenant.
 */
export function buildConsole(deps: ConsoleDeps): ConsoleApp {
  const app = new Hono<ConsoleEnv>();

  // First of all, signed in or not: a form body is at most 1 MiB, refused before it is read.
  app.use('*', async (c, next) => {
    const tooLarge = await capBody(c, MAX_BODY_BYTES);
    if (tooLarge) {
      c.header('Connection', 'close');
      return problemPage(c, 413, 'Too large', new ClientError(tooLarge.code, tooLarge.message, 'send a smaller form', 413));
    }
    await next();
  });

  app.get('/assets/:name', (c) => {
    const asset = assets().get(c.req.param('name'));
    if (!asset) return c.text('not found', 404);
    const fresh = c.req.query('v') === asset.hash;
    const gzip = /\bgzip\b/.test(c.req.header('accept-encoding') ?? '');
    const headers: Record<string, string> = {
      'Content-Type': asset.type,
      'Cache-Control': fresh ? 'public, max-age=31536000, immutable' : 'no-cache',
      ETag: `"${asset.hash}"`,
      Vary: 'Accept-Encoding',
      'X-Content-Type-Options': 'nosniff',
    };
    if (c.req.header('if-none-match') === `"${asset.hash}"`) return c.body(null, 304, headers);
    if (gzip) headers['Content-Encoding'] = 'gzip';
    return c.body(new Uint8Array(gzip ? asset.gzip : asset.body), 200, headers);
  });

  // Before anything else: a state change from another site is refused, signed in or not.
  app.use('*', async (c, next) => {
    if (isStateChange(c.req.method)) {
      const reason = crossSiteReason(c);
      if (reason) {
        deps.log.warn({ req_id: c.get('requestId'), path: c.req.path, reason }, 'console refused a cross-site request');
        return problemPage(c, 403, 'Request refused', new ClientError('forbidden', reason, 'open the console itself and try again', 403));
      }
    }
    await next();
  });

  registerLogin(app, deps);

  // Every other page needs a live session; every change needs its CSRF token too.
  app.use('*', async (c, next) => {
    const token = getCookie(c, SESSION_COOKIE);
    const address = clientAddress(c.env);
    // A session cookie is a credential: an address over its failures is not looked up, a dead one counts.
    const wait = token ? deps.throttle.wait(address) : 0;
    if (wait > 0) {
      c.header('Retry-After', String(wait));
      return problemPage(c, 429, 'Too many attempts', new ClientError('rate_limited', 'too many failed sign-ins from this address', `try again in ${wait} s`, 429));
    }
    const session = token ? await deps.services.sessions.resolve(token) : null;
    if (token && !session) deps.throttle.fail(address);
    if (!session) {
      if (token) deleteCookie(c, SESSION_COOKIE, { path: '/console' });
      if (c.req.header('hx-request')) return c.body(null, 401, { 'HX-Redirect': '/console/login' });
      if (!isStateChange(c.req.method)) {
        const next = c.req.path === '/console' || c.req.path === '/console/' ? '' : `?next=${encodeURIComponent(c.req.path + (new URL(c.req.url).search || ''))}`;
        return c.redirect(`/console/login${next}`, 303);
      }
      return problemPage(c, 401, 'Signed out', new ClientError('unauthorized', 'your session has ended', 'sign in again', 401));
    }
    if (isStateChange(c.req.method)) {
      const submitted = c.req.header(CSRF_HEADER) ?? (await field(c, CSRF_FIELD));
      if (!tokensMatch(submitted, session.csrfToken)) {
        deps.log.warn({ req_id: c.get('requestId'), path: c.req.path }, 'console refused a request without its CSRF token');
        return problemPage(c, 403, 'Request refused', new ClientError('forbidden', 'the form was stale or did not come from this console', 'reload the page and try again', 403), session);
      }
    }
    c.set('session', session);
    c.set('api', consoleApi(deps.callApi, session.principal));
    await next();
  });

  app.get('/', (c) => c.redirect('/console/vms', 303));
  app.post('/logout', async (c) => {
    await deps.services.sessions.signOut(c.get('session'));
    deleteCookie(c, SESSION_COOKIE, { path: '/console', secure: cookieOptions(c, 0).secure });
    return c.redirect('/console/login?signed_out=1', 303);
  });

  registerVms(app, deps);
  registerVm(app, deps);
  registerRun(app);
  registerTemplates(app, deps);
  registerImages(app);
  registerSnapshotsPage(app);
  registerEvents(app);
  registerLedger(app);
  registerWebhooks(app);
  registerDeliveries(app);
  registerWebhookDelete(app);
  registerBilling(app, deps);
  registerKeys(app, deps);

  app.all('*', (c) =>
    problemPage(c, 404, 'Not found', new ClientError('not_found', `no such page: ${c.req.path}`, undefined, 404), c.get('session')),
  );
  app.onError((err, c) => {
    if (err instanceof ClientError) {
      return problemPage(c, err.status ?? 500, err.code === 'not_found' ? 'Not found' : 'That did not work', err, c.get('session'));
    }
    deps.log.error({ req_id: c.get('requestId'), err }, 'console error');
    return problemPage(c, 500, 'Something went wrong', new ClientError('internal', '', `the server log has the details (request ${c.get('requestId')})`, 500), c.get('session'));
  });
  return app;
}

export const SESSION_MAX_AGE_S = SESSION_TTL_MS / 1000;
export { setCookie, SECURITY_HEADERS };
