/**
 * E2B's in-sandbox API ("envd") for every sandbox, served by this server from the VM's guest agent
 * (decisions section 17): a request names its sandbox by the `E2b-Sandbox-Id` header under
 * `/e2b/sandbox` (E2B_SANDBOX_URL), or by its Host `49983-{sandbox id}.{preview domain}` (E2B_DOMAIN),
 * and carries the sandbox's access token in `X-Access-Token` (a `/files` URL may carry a signature made
 * with it instead: signature.ts; such a URL of E2B_SANDBOX_URL's origin, `/files?…&signature=`, names
 * its sandbox by that signature alone). Served: the Connect services
 * `process.Process` and `filesystem.Filesystem`, `/files` (download, upload), `/health`, `/envs`.
 * Another port of a sandbox's Host is a preview (section 16) and goes on to that router.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { timingSafeEqual } from 'node:crypto';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { Code, ConnectError, createContextValues } from '@connectrpc/connect';
import type { GuestAccess } from '../domain/guestAccess.ts';
import { E2bError, e2bErrorOf } from './errors.ts';
import type { Services } from '../domain/services.ts';
import { routeFromHost } from '../domain/previews.ts';
import { shellEnvironment } from '../harness/invoke.ts';
import type { Logger } from '../log.ts';
import { Process } from './gen/process_pb.ts';
import { Filesystem } from './gen/filesystem_pb.ts';
import { processService } from './processService.ts';
import { filesystemService } from './filesystemService.ts';
import { SANDBOX, type SandboxContext } from './context.ts';
import * as store from './store.ts';
import { downloadFile, uploadFiles } from './files.ts';
import { checkSignature, signedOnly } from './signature.ts';
import { collect } from './guestFs.ts';
import { E2B_HOME, WORKSPACE } from '../wire/protocol.ts';
import type { FailureThrottle } from '../throttle.ts';
import { MAX_BODY_BYTES } from '../http/bodyLimit.ts';

/** The port E2B's SDKs reach a sandbox's envd on. */
export const ENVD_PORT = 49983;
export const SANDBOX_PREFIX = '/e2b/sandbox';
const SB = Symbol('e2b sandbox');

type Req = IncomingMessage & { [SB]?: SandboxContext };

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** E2B's error shape. */
export function sendError(res: ServerResponse, code: number, message: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.destroy();
  const body = JSON.stringify({ code, message });
  res.writeHead(code, { ...headers, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
}

/** Which sandbox and port a request names, and the path it asks for there; null when it is not the sandbox plane's. */
export function sandboxRoute(req: IncomingMessage, domain: string): { sandboxId: string; port: number; path: string } | null {
  const url = req.url ?? '/';
  let route;
  try {
    route = routeFromHost(one(req.headers.host), domain);
  } catch {
    route = null; // a malformed Host: not a sandbox's (the previews answer it)
  }
  const byHost = route && 'label' in route ? route : null;
  // A signed file URL of E2B_SANDBOX_URL's origin (not a preview's host: an app's own /files is its own):
  // its sandbox is the one whose token signed it.
  if (!byHost && url.startsWith('/files?') && signedOnly(new URL(url, 'http://sandbox'))) return { sandboxId: '', port: ENVD_PORT, path: url };
  if (url === SANDBOX_PREFIX || url.startsWith(`${SANDBOX_PREFIX}/`) || url.startsWith(`${SANDBOX_PREFIX}?`)) {
    const id = one(req.headers['e2b-sandbox-id'])?.trim() ?? '';
    const port = Number(one(req.headers['e2b-sandbox-port']) ?? ENVD_PORT);
    return { sandboxId: id.toLowerCase(), port, path: url.slice(SANDBOX_PREFIX.length) || '/' };
  }
  if (!byHost || byHost.port !== ENVD_PORT) return null;
  return { sandboxId: byHost.label, port: ENVD_PORT, path: url };
}

/**
 * E2B's user of a request: the Basic authorization's user name, else a `/files` URL's `username` (`user`
 * when neither). A request let in by a signed URL is the URL's user alone: the signature covers it, a
 * header would not.
 */
function userOf(req: IncomingMessage, url: URL, signed: boolean): string {
  if (signed) return url.searchParams.get('username') || 'user';
  const m = /^Basic +(\S+)$/i.exec(one(req.headers.authorization) ?? '');
  const name = m ? Buffer.from(m[1], 'base64').toString('utf8').split(':')[0] : url.pathname === '/files' ? (url.searchParams.get('username') ?? '') : '';
  return name || 'user';
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface SandboxPlane {
  /** Answers the request if it is the sandbox plane's (true), else leaves it (false). */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Readies a new sandbox's guest of an image that may lack E2B's user directory (`/home/user`, a link to the workspace). */
  prepare(tenantId: string, vmId: string): Promise<void>;
}

export function sandboxPlane(services: Services, guest: GuestAccess | null, log: Logger, throttle: FailureThrottle): SandboxPlane {
  const rpc = connectNodeAdapter({
    // A message (a unary call's body, each message of a stream) is capped at 1 MiB as the API's bodies are (section 14).
    readMaxBytes: MAX_BODY_BYTES,
    routes: (router) => {
      router.service(Process, processService());
      router.service(Filesystem, filesystemService());
    },
    contextValues: (req) => createContextValues().set(SANDBOX, (req as Req)[SB] ?? null),
  });

  /**
   * A wrong access token or signature (not a missing one) counts as a failed authentication of the request's address, with
   * the API's (section 14); over them the address gets 429 before any lookup.
   */
  async function resolve(req: IncomingMessage, sandboxId: string, url: URL): Promise<SandboxContext> {
    const address = throttle.addressOf(req);
    const wait = throttle.wait(address);
    if (wait > 0) throw new E2bError(429, `rate_limited: too many failed authentications from this address; retry after ${wait} s`, { 'Retry-After': String(wait) });
    try {
      return await admit(req, sandboxId, url);
    } catch (err) {
      const tried = req.headers['x-access-token'] !== undefined || url.searchParams.has('signature');
      if (tried && err instanceof E2bError && err.status === 401) throttle.fail(address);
      throw err;
    }
  }

  async function admit(req: IncomingMessage, sandboxId: string, url: URL): Promise<SandboxContext> {
    const now = services.clock.now().getTime();
    const found = sandboxId ? await store.vmIdOfSandbox(services.db, null, sandboxId) : await store.sandboxSigning(services.db, (token) => checkSignature(url, req.method ?? 'GET', token, now) !== 'invalid');
    const record = found ? await store.get(services.db, found.vm_id) : null;
    // E2B's proxy answers 502 for a sandbox it cannot reach (its SDKs read that as "not running").
    if (!found || !record) throw sandboxId ? new E2bError(502, `sandbox ${sandboxId} not found`) : new E2bError(401, 'invalid signature');
    const token = one(req.headers['x-access-token']);
    // A file URL may carry a signature made with the token in its place (E2B's signed URLs: signature.ts).
    const signed = token === undefined && url.pathname === '/files' && url.searchParams.has('signature');
    if (signed) {
      const check = checkSignature(url, req.method ?? 'GET', record.access_token, now);
      if (check !== 'valid') throw new E2bError(401, check === 'expired' ? 'signature is already expired' : 'invalid signature');
    } else if (!sameToken(token ?? '', record.access_token)) throw new E2bError(401, 'invalid access token for this sandbox');
    const target = await services.previews.target({ vmId: found.vm_id, port: ENVD_PORT });
    // A paused sandbox whose autoResume is on wakes for the request (as a preview does).
    await services.previews.running(target).catch((err: Error) => {
      throw new E2bError(502, `sandbox ${sandboxId} is not running: ${err.message}`);
    });
    const sb = await contextOf(found.tenant_id, found.vm_id, userOf(req, url, signed), record.env_vars);
    // As E2B's proxy does when its sandbox goes: the connection ends mid-answer (the SDK then asks
    // /health, and a 502 there tells it the sandbox was killed or paused).
    sb.drop = () => req.socket?.destroy();
    return sb;
  }

  async function contextOf(tenantId: string, vmId: string, user: string, envVars: Record<string, string>): Promise<SandboxContext> {
    if (!guest) throw new E2bError(503, 'no VM host is attached to this server');
    const vm = await services.vms.get(tenantId, vmId);
    return {
      vmId: vm.vm_id,
      tenantId: vm.tenant_id,
      user,
      envVars,
      openShell: (size, process) => guest.openShell(vm.vm_id, { ...size, env: shellEnvironment(vm.harness, vm.brokered_secret_names), process }),
      listProcesses: async () => (guest.listProcesses ? guest.listProcesses(vm.vm_id) : null),
      attachProcess: async (pid) => (guest.attachProcess ? guest.attachProcess(vm.vm_id, pid) : null),
      holdStream: () =>
        services.limits.openStream(vm.tenant_id, 'shell').catch((err: { code?: string; message: string }) => {
          throw err.code === 'quota_exceeded' ? new ConnectError(`quota_exceeded: ${err.message}`, Code.ResourceExhausted) : err;
        }),
    };
  }

  async function serve(req: Req, res: ServerResponse, route: { sandboxId: string; path: string }): Promise<void> {
    const url = new URL(route.path, 'http://sandbox');
    const sb = await resolve(req, route.sandboxId, url);
    if (url.pathname === '/health') {
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === '/envs' && req.method === 'GET') {
      const body = JSON.stringify(sb.envVars);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(body);
      return;
    }
    if (url.pathname === '/files') {
      if (req.method === 'GET') return downloadFile(services, sb, url, req, res);
      if (req.method === 'POST') return uploadFiles(services, sb, url, req, res);
      return sendError(res, 405, `${req.method} is not allowed on /files`);
    }
    if (/^\/(process\.Process|filesystem\.Filesystem)\//.test(url.pathname)) {
      req[SB] = sb;
      req.url = route.path;
      rpc(req, res);
      return;
    }
    sendError(res, 404, `no such path: ${url.pathname}`);
  }

  return {
    async prepare(tenantId, vmId) {
      // As root: the guest starts it so (an older guest through sudo, which costs a PAM session under emulation).
      const sb = await contextOf(tenantId, vmId, 'root', {});
      const r = await collect(sb, ['sh', '-c', `[ -e ${E2B_HOME} ] || ln -s ${WORKSPACE} ${E2B_HOME}`]);
      if (r.exitCode !== 0) log.warn({ vm_id: vmId, err: r.stderr.trim() }, `e2b sandbox: ${E2B_HOME} could not be made`);
    },
    handle(req, res) {
      const route = sandboxRoute(req, services.previews.site.domain);
      if (!route) return false;
      if (route.port !== ENVD_PORT) {
        sendError(res, 404, `port ${route.port}: reach a sandbox's other ports at their preview URLs ({port}-{sandbox id}.{domain})`);
        return true;
      }
      serve(req, res, route).catch((err: unknown) => {
        const known = e2bErrorOf(err);
        if (known) return sendError(res, known.status, known.message, known.headers);
        log.error({ err: (err as Error).message }, 'e2b sandbox request failed');
        sendError(res, 500, 'internal error');
      });
      return true;
    },
  };
}

/** The request's body as a web stream (for a multipart parse). */
export const webBody = (req: IncomingMessage) => Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>;
