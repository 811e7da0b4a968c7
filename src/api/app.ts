import { Hono, type Context } from 'hono';
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { timingSafeEqual, createHash, randomBytes } from 'node:crypto';
import { DomainError } from '../domain/errors.ts';
import type { Services } from '../domain/services.ts';
import { requestLogger, type Logger } from '../log.ts';
import { runOperation, type Operation } from './operation.ts';
import { renderError } from '../http/errors.ts';
import { requestHeader } from '../http/requestHeader.ts';
import { ADMIN_OPERATIONS, CUSTOMER_OPERATIONS } from './routes.ts';
import { buildOpenApiDocument } from './openapi.ts';
import { capBody, MAX_BODY_BYTES, MCP_MAX_BODY_BYTES } from '../http/bodyLimit.ts';
import { clientAddress, FailureThrottle, RateLimiter } from '../throttle.ts';
import { apiClient } from '../client/client.ts';
import type { Principal } from '../domain/keys.ts';
import { buildConsole } from '../console/app.tsx';

export interface AppOptions {
  services: Services;
  log: Logger;
  adminToken: string;
  rateLimit: { perSecond: number; burst: number };
  /** Requests per key, shared with E2B's control plane (a key's rate is one); one of its own, of `rateLimit`, when not given. */
  limiter?: RateLimiter;
  /** Failed authentications per address, shared with the previews and port forwards; one of its own when not given. */
  throttle?: FailureThrottle;
}

type Env = { Variables: { principal: unknown; requestId: string } };

/**
 * The env of a request made in process by the web console: the principal of its session. Only code in
 * this process can pass an env (a request from the network gets the socket's), so it cannot be forged.
 */
export interface InProcessEnv {
  principal?: Principal;
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{8,64}$/;
/** Request ids: a random prefix per process (unique across replicas) and a counter (cheap per request). */
const REQUEST_ID_PREFIX = `req_${randomBytes(6).toString('hex')}`;
let requestCounter = 0;
const nextRequestId = () => `${REQUEST_ID_PREFIX}${(++requestCounter).toString(36).padStart(8, '0')}`;
const OPENAPI_PATH = '/v1/api/openapi.json';
const MCP_PATH = '/v1/mcp';
/** The public operation that checks a credential (a login code): its failures count against the address. */
const LOGIN_COMPLETE_PATH = '/v1/auth/login/complete';

/** Method and path pattern of every route, for 405 answers with an Allow header. */
function routeTable(operations: Operation[]) {
  const table = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  const add = (p: string, method: string) => {
    const entry = table.get(p) ?? { pattern: new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`), methods: new Set<string>() };
    entry.methods.add(method);
    if (method === 'GET') entry.methods.add('HEAD');
    table.set(p, entry);
  };
  for (const op of operations) add(op.path, op.method.toUpperCase());
  for (const p of ['/healthz', '/readyz', OPENAPI_PATH, '/docs', '/v1/admin/openapi.json']) add(p, 'GET');
  for (const m of ['GET', 'POST', 'DELETE']) add(MCP_PATH, m);
  return [...table.values()];
}

const digest = (s: string) => createHash('sha256').update(s).digest();

export function bearerToken(c: Context): string | null {
  const header = requestHeader(c, 'authorization');
  const match = header && /^Bearer +(\S+) *$/i.exec(header);
  return match ? match[1] : null;
}

/** The customer contract as served at /v1/api/openapi.json (and what the typed client is generated from). */
export function customerOpenApiDocument() {
  return buildOpenApiDocument(CUSTOMER_OPERATIONS, {
    title: 'agentvm customer API',
    description:
      'Tenant-scoped REST API that gives every AI coding agent its own isolated microVM. Operations marked ' +
      '`x-agentvm-extension` go beyond the 19 of the contract; `x-agentvm-charges-money` marks money operations. ' +
      "E2B's API (for E2B's SDKs, keys of format `e2b`) is served apart, in E2B's shapes: under `/e2b`, and at the " +
      'root of the host `api.{preview domain}` (`E2B_DOMAIN` alone).\n\n' +
      '**Preview URLs** (not operations of this document): a port a VM listens on (80, 443, 1024–65535) is reached at ' +
      '`{scheme}://{port}-{preview_label}.{preview domain}`, or at the API\'s own address with the headers ' +
      '`X-Agentvm-Vm: <vm_id>` and `X-Agentvm-Port: <port>`. A private port (the default) needs the tenant\'s API key ' +
      '(`Authorization: Bearer`), the VM\'s preview token (`X-Agentvm-Preview-Token`, see `rotatePreviewToken`) or the ' +
      'cookie that `?agentvm_token=<token>` sets for that one host; the credential and the routing headers are stripped ' +
      'before the request reaches the app. Refusals answer by `Accept`, in the Error shape as JSON: 401 `unauthorized`, ' +
      '400 for a malformed Host or a port outside the range, 404 for an unknown VM, 409 `vm_not_running`, 502 `port_closed`; ' +
      'a suspended VM with `auto_resume` is started by the request (which waits up to 30 s). HTTP/1.1 streaming, ' +
      'server-sent events and WebSocket upgrades pass unbuffered. `GET /v1/api/vms/{id}/ports/{port}/socket` upgraded to ' +
      'a WebSocket carries one TCP connection to the port (what `agentvm vms forward` uses).',
  });
}

export function adminOpenApiDocument() {
  return buildOpenApiDocument(ADMIN_OPERATIONS, {
    title: 'agentvm operator API',
    description: 'Operator API, not part of the customer contract. Bearer: the admin token.',
  });
}

export function buildApp(opts: AppOptions): Hono<Env> {
  const { services, log } = opts;
  const app = new Hono<Env>();
  const limiter = opts.limiter ?? new RateLimiter(opts.rateLimit.perSecond, opts.rateLimit.burst, () => services.clock.now().getTime());
  // Failed authentications per client address, API and console together (section 14).
  const throttle = opts.throttle ?? new FailureThrottle(() => services.clock.now().getTime());
  // Operations whose body is bytes (a VM's files) or carries files (an image's build context) have caps of
  // their own; every other body is capped at 1 MiB.
  const ownCaps = [...CUSTOMER_OPERATIONS, ...ADMIN_OPERATIONS]
    .filter((op) => op.binaryBody || op.body?.maxBytes)
    .map((op) => ({
      method: op.method.toUpperCase(),
      pattern: new RegExp(`^${op.path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      // A stream of bytes is counted as it is read; a JSON body is held to its cap before it is read.
      cap: op.binaryBody ? null : op.body!.maxBytes!,
    }));
  const adminDigest = digest(opts.adminToken);
  const routes = routeTable([...CUSTOMER_OPERATIONS, ...ADMIN_OPERATIONS]);
  // The documents are made when first asked for, not at each start.
  let customerDoc: ReturnType<typeof customerOpenApiDocument> | undefined;
  let adminDoc: ReturnType<typeof adminOpenApiDocument> | undefined;

  const reqLog = requestLogger(log);
  const logRequest = (c: Context, requestId: string, status: number, started: number) =>
    reqLog.info(
      { req_id: requestId, method: c.req.method, path: c.req.path, status, ms: Math.round((performance.now() - started) * 10) / 10 },
      'request',
    );
  const handleError = (err: Error, c: Context): Response => {
    if (err instanceof DomainError) return renderError(c, err);
    log.error({ req_id: c.get('requestId'), err }, 'unexpected error');
    return renderError(c, new DomainError('internal', ''));
  };

  // One middleware for what every request gets: its id, the caller's authentication (before routing,
  // so that an unauthenticated caller learns nothing of the routes) and its log line.
  app.use('*', async (c, next) => {
    const started = performance.now();
    const incoming = requestHeader(c, 'x-request-id');
    const requestId = incoming && SAFE_REQUEST_ID.test(incoming) ? incoming : nextRequestId();
    c.set('requestId', requestId);
    // Set before the handler runs so that it goes out with the response the handler makes: touching
    // c.res.headers afterwards would turn the server's light response into a full Fetch Response.
    c.header('X-Request-Id', requestId);
    const p = c.req.path;
    const address = clientAddress(c.env, throttle.trustedProxies);
    try {
      // The console caps its own forms (its answers are pages).
      if (!p.startsWith('/console')) {
        const own = ownCaps.find((r) => r.method === c.req.method && r.pattern.test(p));
        const cap = own ? own.cap : p === MCP_PATH ? MCP_MAX_BODY_BYTES : MAX_BODY_BYTES;
        const tooLarge = cap === null ? null : await capBody(c, cap);
        if (tooLarge) throw tooLarge;
      }
      if ((p.startsWith('/v1/api/') && p !== OPENAPI_PATH) || p === MCP_PATH) await authenticateCustomer(c, address);
      else if (p.startsWith('/v1/admin/') && p !== '/v1/admin/openapi.json') authenticateAdmin(c, address);
      else if (p === LOGIN_COMPLETE_PATH) throttle.check(address);
    } catch (err) {
      const res = handleError(err as Error, c);
      logRequest(c, requestId, res.status, started);
      return res;
    }
    await next();
    // A wrong login code (or one refused for its email's wrong codes) is a failed authentication of the address.
    if (p === LOGIN_COMPLETE_PATH && (c.res.status === 401 || c.res.status === 429)) throttle.fail(address);
    logRequest(c, requestId, c.res.status, started);
  });

  app.onError(handleError);

  app.notFound((c) => {
    const entry = routes.find((r) => r.pattern.test(c.req.path));
    if (entry && !entry.methods.has(c.req.method)) {
      const allow = [...entry.methods].join(', ');
      return renderError(c, new DomainError('method_not_allowed', `${c.req.method} is not allowed here; use ${allow}`, undefined, { Allow: allow }));
    }
    return renderError(c, new DomainError('not_found', `no such path: ${c.req.path}`));
  });

  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    const [database, driver] = await Promise.all([
      services.db.query('SELECT 1').then(() => 'ok', (err: Error) => `error: ${err.message}`),
      services.driver(),
    ]);
    if (database === 'ok' && driver.usable) {
      return c.json({ ok: true, database, driver: { accel: driver.accel, detail: driver.detail } });
    }
    const why = database !== 'ok' ? 'the database is not usable' : `the VM driver is not usable: ${driver.detail}`;
    return renderError(c, new DomainError('unavailable', why, 'see the server log', { 'Retry-After': '5' }));
  });
  app.get(OPENAPI_PATH, (c) => c.json((customerDoc ??= customerOpenApiDocument())));
  app.get('/v1/admin/openapi.json', (c) => c.json((adminDoc ??= adminOpenApiDocument())));
  app.get('/docs', (c) => c.html(DOCS_HTML));
  app.get('/docs/assets/:file', async (c) => {
    const file = c.req.param('file');
    if (!DOCS_ASSETS[file]) return renderError(c, new DomainError('not_found', `no such path: ${c.req.path}`));
    const body = await readFile(path.join(swaggerUiDir(), file));
    return c.body(body, 200, { 'Content-Type': DOCS_ASSETS[file], 'Cache-Control': 'public, max-age=86400' });
  });

  /**
   * An address over its failed authentications is refused before its credential is looked at (no
   * database query); a credential that fails counts against it.
   */
  async function authenticateCustomer(c: Context, address: string | null): Promise<void> {
    const inProcess = (c.env as InProcessEnv | undefined)?.principal;
    if (!inProcess) throttle.check(address);
    const token = inProcess ? null : bearerToken(c);
    const principal = inProcess ?? (token ? await services.keys.authenticate(token) : null);
    if (!principal) {
      if (token) throttle.fail(address);
      throw new DomainError('unauthorized', '');
    }
    limit(principal.keyId);
    c.set('principal', principal);
  }

  function authenticateAdmin(c: Context, address: string | null): void {
    throttle.check(address);
    const token = bearerToken(c);
    if (!token || !timingSafeEqual(digest(token), adminDigest)) {
      if (token) throttle.fail(address);
      throw new DomainError('unauthorized', '');
    }
    limit('admin');
  }

  function limit(bucket: string) {
    const waitSeconds = limiter.take(bucket);
    if (waitSeconds > 0) {
      throw new DomainError('rate_limited', 'too many requests for this key', `retry after ${waitSeconds} s`, {
        'Retry-After': String(waitSeconds),
      });
    }
  }

  // MCP over streamable HTTP, stateless: each request gets a server whose tools call this API in
  // process with the caller's own key, so every rule (scope, tenancy, money) applies unchanged. The MCP
  // SDK is loaded with the first such request (a third of the server's code, not needed to start).
  app.on(['GET', 'POST', 'DELETE'], MCP_PATH, async (c) => {
    const [{ createMcpServer }, { WebStandardStreamableHTTPServerTransport }] = await Promise.all([
      import('../mcp/server.ts'),
      import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
    ]);
    const key = bearerToken(c)!;
    const server = createMcpServer(() => apiClient('http://agentvm.internal', key, (req) => app.fetch(req)));
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    return transport.handleRequest(c.req.raw);
  });

  for (const op of [...CUSTOMER_OPERATIONS, ...ADMIN_OPERATIONS]) {
    app.on(op.method.toUpperCase(), op.path.replace(/\{([^}]+)\}/g, ':$1'), (c) => runOperation(op, c, services));
  }

  // The web console calls these same operations in process, as its session's principal.
  app.route(
    '/console',
    buildConsole({ services, log, throttle, callApi: (request, principal) => app.fetch(request, { principal } satisfies InProcessEnv) }),
  );
  return app;
}

const DOCS_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
};
let swaggerDir: string | undefined;
function swaggerUiDir(): string {
  swaggerDir ??= path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  return swaggerDir;
}

const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>agentvm API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<noscript>The contract is at <a href="${OPENAPI_PATH}">${OPENAPI_PATH}</a>.</noscript>
<div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '${OPENAPI_PATH}', dom_id: '#ui', deepLinking: true });</script>
</body>
</html>`;
