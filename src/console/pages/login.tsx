import type { Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import { DomainError } from '../../domain/errors.ts';
import { statusOf } from '../../http/errors.ts';
import { LoginCompleteRequest } from '../../api/schemas.ts';
import { validationError } from '../../api/operation.ts';
import { call, ClientError, consoleApi } from '../api.ts';
import { field, safeNext, SESSION_MAX_AGE_S, type ConsoleApp, type ConsoleDeps } from '../app.tsx';
import { page } from '../layout.tsx';
import { clientAddress } from '../../throttle.ts';
import { cookieOptions, CSRF_FIELD, LOGIN_CSRF_COOKIE, newCsrfValue, SESSION_COOKIE, tokensMatch } from '../security.ts';

const LOGIN_CSRF_MAX_AGE_S = 30 * 60;

/** The login forms' own CSRF value: a cookie and the same value in the form (before sign-in there is no session). */
function loginCsrf(c: Context): string {
  const existing = getCookie(c, LOGIN_CSRF_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{32}$/.test(existing)) return existing;
  const value = newCsrfValue();
  setCookie(c, LOGIN_CSRF_COOKIE, value, cookieOptions(c, LOGIN_CSRF_MAX_AGE_S));
  return value;
}

const toClientError = (err: DomainError) => new ClientError(err.code, err.message, err.hint, statusOf(err));

function EmailForm({ csrf, next, email }: { csrf: string; next: string; email?: string }) {
  return (
    <form class="card narrow stack" method="post" action="/console/login">
      <input type="hidden" name={CSRF_FIELD} value={csrf} />
      <input type="hidden" name="next" value={next} />
      <p class="muted">We email you a one-time code. No password to remember.</p>
      <label for="email">Email</label>
      <input id="email" name="email" type="email" autocomplete="email" required autofocus value={email ?? ''} />
      <button type="submit" class="button primary">
        Email me a code
      </button>
    </form>
  );
}

function CodeForm({ csrf, next, email }: { csrf: string; next: string; email: string }) {
  return (
    <form class="card narrow stack" method="post" action="/console/login/code">
      <input type="hidden" name={CSRF_FIELD} value={csrf} />
      <input type="hidden" name="next" value={next} />
      <input type="hidden" name="email" value={email} />
      <p>
        If <strong>{email}</strong> has an account, a 6-digit code is on its way. It works once, for 10 minutes.
      </p>
      <p class="muted small">No mail server configured? The code is in the server's log.</p>
      <label for="code">Code</label>
      <input id="code" name="code" inputmode="numeric" pattern="[0-9]{6}" maxlength={6} autocomplete="one-time-code" required autofocus />
      <button type="submit" class="button primary">
        Sign in
      </button>
      <p class="small">
        <a href={`/console/login?next=${encodeURIComponent(next)}`}>Use another email or get a new code</a>
      </p>
    </form>
  );
}

export function registerLogin(app: ConsoleApp, deps: ConsoleDeps) {
  const signedIn = async (c: Context) => {
    const token = getCookie(c, SESSION_COOKIE);
    return token ? deps.services.sessions.resolve(token) : null;
  };

  app.get('/login', async (c) => {
    const next = safeNext(c.req.query('next'));
    if (await signedIn(c)) return c.redirect(next, 303);
    const notice = c.req.query('signed_out') ? 'You are signed out.' : null;
    return page(c, { title: 'Sign in to agentvm', notice, centered: true }, <EmailForm csrf={loginCsrf(c)} next={next} />);
  });

  const checkLoginCsrf = async (c: Context) => {
    const expected = getCookie(c, LOGIN_CSRF_COOKIE);
    return !!expected && tokensMatch(await field(c, CSRF_FIELD), expected);
  };
  const staleForm = new ClientError('forbidden', 'the sign-in form was stale or did not come from this console', 'try again from this page', 403);

  app.post('/login', async (c) => {
    const next = safeNext(await field(c, 'next'));
    const email = await field(c, 'email');
    if (!(await checkLoginCsrf(c))) {
      return page(c, { title: 'Sign in to agentvm', problem: staleForm, status: 403, centered: true }, <EmailForm csrf={loginCsrf(c)} next={next} email={email} />);
    }
    try {
      await call(consoleApi(deps.callApi).POST('/v1/auth/login/start', { body: { email } }));
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return page(c, { title: 'Sign in to agentvm', problem: err, status: err.status, centered: true }, <EmailForm csrf={loginCsrf(c)} next={next} email={email} />);
    }
    return page(c, { title: 'Enter your code', centered: true }, <CodeForm csrf={loginCsrf(c)} next={next} email={email} />);
  });

  app.post('/login/code', async (c) => {
    const next = safeNext(await field(c, 'next'));
    const email = await field(c, 'email');
    const code = (await field(c, 'code')).replace(/\s+/g, '');
    const again = (problem: ClientError) =>
      page(c, { title: 'Enter your code', problem, status: problem.status, centered: true }, <CodeForm csrf={loginCsrf(c)} next={next} email={email} />);
    if (!(await checkLoginCsrf(c))) return again(staleForm);
    const parsed = LoginCompleteRequest.safeParse({ email, code });
    if (!parsed.success) return again(toClientError(validationError('body', parsed.error)));
    // A code is a credential: an address over its failed authentications is refused before it is looked up.
    const address = clientAddress(c.env);
    const wait = deps.throttle.wait(address);
    if (wait > 0) {
      c.header('Retry-After', String(wait));
      return again(new ClientError('rate_limited', 'too many failed sign-ins from this address', `try again in ${wait} s`, 429));
    }
    let token: string;
    try {
      ({ token } = await deps.services.sessions.signIn(parsed.data.email, parsed.data.code));
    } catch (err) {
      if (err instanceof DomainError) {
        if (err.code === 'unauthorized' || err.code === 'rate_limited') deps.throttle.fail(address);
        if (err.headers?.['Retry-After']) c.header('Retry-After', err.headers['Retry-After']);
        return again(toClientError(err));
      }
      throw err;
    }
    setCookie(c, SESSION_COOKIE, token, cookieOptions(c, SESSION_MAX_AGE_S));
    deleteCookie(c, LOGIN_CSRF_COOKIE, { path: '/console' });
    deps.log.info({ req_id: c.get('requestId') }, 'console sign-in');
    return c.redirect(next, 303);
  });
}
