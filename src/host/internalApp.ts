/**
 * The host side of the internal endpoint: health, readiness and /internal/*. Every /internal/* call needs
 * a live API replica credential (internalAuth.ts) and names a VM placed on this host; an address with too
 * many failed credentials is refused before any is looked up; a body is at most 1 MiB (a file's bytes
 * aside). Each call is validated against its route in internalContract.ts and answered, or refused, in
 * the public Error shape.
 */
import { Hono, type Context } from 'hono';
import type { z } from 'zod';
import type { Logger } from '../log.ts';
import type { VmExecutor } from '../domain/runs.ts';
import type { DriverProbe } from '../vmm/probe.ts';
import { DomainError } from '../domain/errors.ts';
import { renderError } from '../http/errors.ts';
import { capBody, MAX_BODY_BYTES } from '../http/bodyLimit.ts';
import { HOST_CREDENTIAL_HEADER, INTERNAL_FILES_PATH, INTERNAL_ROUTES, VmIdParam, type InternalRoute } from './internalContract.ts';
import { checkedPath, type GuestAccess } from '../domain/guestAccess.ts';
import { clientAddress, FailureThrottle, throttledError } from '../throttle.ts';
import type { InternalAuthority } from './internalAuth.ts';
import type { PortAccess } from '../domain/previewAccess.ts';
import type { SnapshotHost } from '../domain/snapshots.ts';

export interface InternalAppOptions {
  authority: InternalAuthority;
  /** Failed credentials per client address (shared with the shell sockets); one of its own when not given. */
  throttle?: FailureThrottle;
  /** Null where this machine cannot run VMs (no QEMU): every internal call is then 503. */
  executor: VmExecutor | null;
  /** Shells and files of this host's guests (the shells' sockets are internalShell.ts). */
  guest: GuestAccess | null;
  /** The guests' TCP ports (previews; their connections are internalPorts.ts). */
  ports?: PortAccess | null;
  capture: ((templateId: string) => void) | null;
  /** This host's snapshots and branches (branching.ts); none where it cannot take them. */
  snapshots?: SnapshotHost | null;
  probe: () => Promise<DriverProbe>;
  log: Logger;
}

/** The first zod issue as the public API words it: `field: problem`. */
function invalidFrom(err: z.ZodError, where: string): DomainError {
  const issue = err.issues[0];
  const field = issue?.path.length ? issue.path.join('.') : where;
  return new DomainError('invalid_request', `${field}: ${issue?.message ?? 'invalid'}`);
}

export function buildInternalApp(o: InternalAppOptions): Hono {
  const app = new Hono();
  const throttle = o.throttle ?? new FailureThrottle();
  const notHere = (what: string) => new DomainError('not_found', `no such ${what} on this host`);
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/readyz', async (c) => {
    const p = await o.probe();
    return c.json({ ok: p.usable, driver: { accel: p.accel, detail: p.detail } }, p.usable ? 200 : 503);
  });
  app.use('/internal/*', async (c, next) => {
    const address = clientAddress(c.env);
    const wait = throttle.wait(address);
    if (wait > 0) return renderError(c, throttledError(wait));
    const token = /^Bearer (.+)$/.exec(c.req.header('authorization') ?? '')?.[1];
    if (!(await o.authority.replica(token))) {
      if (token) throttle.fail(address);
      return renderError(c, new DomainError('unauthorized', ''));
    }
    c.header(HOST_CREDENTIAL_HEADER, o.authority.credential);
    if (!(c.req.method === 'PUT' && /^\/internal\/vms\/[^/]+\/files$/.test(c.req.path))) {
      const tooLarge = await capBody(c, MAX_BODY_BYTES);
      if (tooLarge) return renderError(c, tooLarge);
    }
    if (!o.executor || !o.capture) return renderError(c, new DomainError('unavailable', 'this host cannot run VMs', undefined, { 'Retry-After': '30' }));
    await next();
  });
  app.onError((err, c) => {
    if (err instanceof DomainError) return renderError(c, err);
    o.log.warn({ err, path: c.req.path }, 'internal request failed');
    return renderError(c, new DomainError('internal', ''));
  });
  app.notFound((c) => renderError(c, new DomainError('not_found', `no such path: ${c.req.path}`)));

  /** Registers one route: its id and body parsed with the contract's schemas, its answer from `handle`. */
  function route<R extends InternalRoute>(
    name: R,
    handle: (id: string, body: (typeof INTERNAL_ROUTES)[R]['body'] extends z.ZodType ? z.output<(typeof INTERNAL_ROUTES)[R]['body']> : undefined) => Promise<{ body: z.input<(typeof INTERNAL_ROUTES)[R]['response']>; status?: 200 | 202 }>,
  ): void {
    const def = INTERNAL_ROUTES[name];
    app[def.method](def.path, async (c: Context) => {
      const id = def.params.safeParse(c.req.param('id'));
      if (!id.success) throw invalidFrom(id.error, 'id');
      // Only what the database places on this host: a VM's row, a template's source VM, a snapshot.
      const kind = name === 'capture' ? 'template' : def.path.startsWith('/internal/snapshots/') ? 'snapshot' : 'VM';
      const holds = kind === 'template' ? o.authority.holdsTemplate : kind === 'snapshot' ? o.authority.holdsSnapshot : o.authority.holdsVm;
      if (!(await holds(id.data))) throw notHere(kind);
      let body: unknown;
      if (def.body) {
        const raw = await c.req.json().catch(() => {
          throw new DomainError('invalid_request', 'body: malformed JSON');
        });
        const parsed = def.body.safeParse(raw);
        if (!parsed.success) throw invalidFrom(parsed.error, 'body');
        body = parsed.data;
      }
      const out = await handle(id.data, body as never);
      return c.json(out.body, out.status ?? 200);
    });
  }

  const executor = () => o.executor!;
  route('harnesses', async (vmId) => ({ body: { harnesses: await executor().harnesses(vmId) } }));
  route('runs', async (vmId) => {
    executor().kickRuns(vmId);
    return { body: { kicked: true } };
  });
  route('cancelRun', async (vmId, { run_id }) => {
    await executor().cancelRun(vmId, run_id);
    return { body: { cancelled: true } };
  });
  route('secrets', async (vmId, { set }) => ({ body: await executor().setSecrets(vmId, set) }));
  // A VM's files, bytes streamed both ways (INTERNAL_FILES_PATH in internalContract.ts).
  const fileTarget = async (c: Context) => {
    const id = VmIdParam.safeParse(c.req.param('id'));
    if (!id.success) throw invalidFrom(id.error, 'id');
    if (!(await o.authority.holdsVm(id.data))) throw notHere('VM');
    if (!o.guest) throw new DomainError('unavailable', 'this host cannot run VMs', undefined, { 'Retry-After': '30' });
    return { vmId: id.data, path: checkedPath(c.req.query('path')) };
  };
  app.get(INTERNAL_FILES_PATH, async (c) => {
    const { vmId, path } = await fileTarget(c);
    const r = await o.guest!.readFile(vmId, path);
    if (r.kind === 'dir') return c.json(r);
    return c.body(r.body, 200, { 'Content-Type': 'application/octet-stream', 'Content-Length': String(r.size), 'X-Agentvm-Path': encodeURI(r.path) });
  });
  app.put(INTERNAL_FILES_PATH, async (c) => {
    const { vmId, path } = await fileTarget(c);
    const maxBytes = Number(c.req.query('max_bytes'));
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new DomainError('invalid_request', 'max_bytes: must be a byte count');
    const declared = c.req.header('content-length');
    const body = (c.req.raw.body ?? new ReadableStream({ start: (ctl) => ctl.close() })) as unknown as AsyncIterable<Uint8Array>;
    const written = await o.guest!.writeFile(vmId, path, body, { maxBytes, expectedBytes: declared === undefined ? undefined : Number(declared) });
    return c.json(written, 201);
  });
  route('ports', async (vmId) => {
    if (!o.ports) throw new DomainError('unavailable', 'this host cannot run VMs', undefined, { 'Retry-After': '30' });
    return { body: { ports: await o.ports.list(vmId) } };
  });
  route('capture', async (templateId) => {
    o.capture!(templateId);
    return { body: { started: true }, status: 202 };
  });
  const snapshots = () => {
    if (!o.snapshots) throw new DomainError('unavailable', 'this host cannot take or start snapshots', undefined, { 'Retry-After': '30' });
    return o.snapshots;
  };
  const here = o.authority.hostId;
  route('snapshotTake', async (vmId, req) => ({ body: await snapshots().take(here, { vm_id: vmId, ...req }) }));
  route('snapshotCheck', async (snapshotId) => ({ body: { damaged: await snapshots().check(here, snapshotId) } }));
  route('snapshotPrepare', async (snapshotId, { vm_ids }) => {
    await snapshots().prepare(here, snapshotId, vm_ids);
    return { body: { prepared: true } };
  });
  route('snapshotDiscard', async (snapshotId, { snapshot, vm_ids }) => {
    if (snapshot) await snapshots().discard(here, snapshotId);
    if (vm_ids.length) await snapshots().discardVms(here, snapshotId, vm_ids);
    return { body: { discarded: true } };
  });
  route('sealedSecrets', async (vmId, { vm_ids }) => ({ body: { sealed: await snapshots().sealedSecrets(here, vmId, vm_ids) } }));
  return app;
}
