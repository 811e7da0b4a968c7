/**
 * E2B's control plane under `/e2b` (decisions section 17): the sandbox operations of E2B's public
 * OpenAPI document with its field names, status codes and error shape (`{"code", "message"}`), over
 * agentvm's VMs. A sandbox is a VM of the key's tenant; its id is the VM's preview label. The key
 * comes in `X-API-Key` (E2B's SDKs) or as a Bearer.
 */
import { Hono, type Context } from 'hono';
import { randomBytes } from 'node:crypto';
import { E2bError, e2bError, e2bErrorOf } from './errors.ts';
import type { Principal } from '../domain/keys.ts';
import type { Services } from '../domain/services.ts';
import type { VmRow } from '../domain/vms.ts';
import { getHarness } from '../harness/catalogue.ts';
import { previewLabel, validPreviewHost } from '../domain/previews.ts';
import type { Logger } from '../log.ts';
import { clientAddress, type FailureThrottle, type RateLimiter } from '../throttle.ts';
import { capBody, MAX_BODY_BYTES } from '../http/bodyLimit.ts';
import * as store from './store.ts';
import { DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S } from './store.ts';
import { forgetProcesses } from './processService.ts';
import { isSnapshotId, snapshotRoutes } from './snapshots.ts';
import { forkRoute } from './fork.ts';
import { listRoutes } from './list.ts';
import { egressFrom, networkOf, networkRoute } from './network.ts';

/** The envd version agentvm answers: the SDK features it gates on that version are the ones served here. */
export const ENVD_VERSION = '0.6.4';
/** How long a create waits for its VM to run (E2B's create answers a running sandbox; the first VM of a plan boots cold). */
const START_WAIT_MS = 600_000;

type Env = { Variables: { principal: Principal } };



const timeoutOf = (v: unknown): number | null => {
  if (v === undefined || v === null) return DEFAULT_TIMEOUT_S;
  return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= MAX_TIMEOUT_S ? (v as number) : null;
};

function stringMap(v: unknown): Record<string, string> | null {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) return null;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string') return null;
    out[k] = x;
  }
  return out;
}

/** How long a create waits for a host with room (a sandbox just killed frees its room a moment later). */
const ROOM_WAIT_MS = 120_000;

/**
 * Runs a create, again while no host has room for it (503 `unavailable`): E2B's create is one call
 * that answers a sandbox, and a refused create charged nothing, so trying again is safe.
 */
async function untilRoom<T>(signal: AbortSignal, create: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + ROOM_WAIT_MS;
  for (;;) {
    try {
      return await create();
    } catch (err) {
      if ((err as { code?: string }).code !== 'unavailable' || Date.now() > deadline || signal.aborted) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** What guards the planes as it guards the API (section 14): failed authentications per address, requests per key. */
export interface E2bGuards {
  throttle: FailureThrottle;
  limiter: RateLimiter;
}

export function controlPlane(services: Services, log: Logger, prepare: (tenantId: string, vmId: string) => Promise<void>, { throttle, limiter }: E2bGuards): Hono<Env> {
  const app = new Hono<Env>().basePath('/e2b');
  const domain = () => services.previews.site.domain;

  app.onError((err, c) => {
    const known = e2bErrorOf(err);
    if (known) {
      for (const [k, v] of Object.entries(known.headers ?? {})) c.header(k, v);
      return e2bError(c, known.status, known.message);
    }
    log.error({ err: err.message }, 'e2b request failed');
    return e2bError(c, 500, 'internal error');
  });
  app.notFound((c) => e2bError(c, 404, `no such path: ${c.req.path}`));

  app.use('*', async (c, next) => {
    // A body over 1 MiB is refused before anything reads it, and its connection closed (section 14).
    const tooLarge = await capBody(c, MAX_BODY_BYTES);
    if (tooLarge) {
      c.header('Connection', 'close');
      return e2bError(c, 413, `payload_too_large: ${tooLarge.message}`);
    }
    // Failed authentications count against the address with the API's (section 14): over them, 429 before any lookup.
    const address = clientAddress(c.env, throttle.trustedProxies);
    const wait = throttle.wait(address);
    if (wait > 0) {
      c.header('Retry-After', String(wait));
      return e2bError(c, 429, `rate_limited: too many failed authentications from this address; retry after ${wait} s`);
    }
    const key = c.req.header('x-api-key') ?? /^Bearer +(\S+)$/i.exec(c.req.header('authorization') ?? '')?.[1];
    const principal = key ? await services.keys.authenticate(key) : null;
    if (!principal) {
      if (key) throttle.fail(address);
      return e2bError(c, 401, 'Invalid API key');
    }
    // A key's requests here and to the API draw on one rate (AGENTVM_RATE_LIMIT).
    const busy = limiter.take(principal.keyId);
    if (busy > 0) {
      c.header('Retry-After', String(busy));
      return e2bError(c, 429, `rate_limited: too many requests for this key; retry after ${busy} s`);
    }
    c.set('principal', principal);
    await next();
  });

  const writable = (c: Context<Env>) => {
    if (c.get('principal').scope !== 'readwrite') throw new E2bError(403, 'read_only_key: this key may only read; use a key with scope readwrite');
  };

  /** The tenant's VM a sandbox id names; 404 in E2B's shape otherwise (another tenant's too). */
  async function vmOf(c: Context<Env>): Promise<{ vm: VmRow; record: store.SandboxRecord | null }> {
    const id = c.req.param('sandboxID') ?? '';
    const found = await store.vmIdOfSandbox(services.db, c.get('principal').tenantId, id.toLowerCase());
    if (!found) throw new E2bError(404, `sandbox "${id.slice(0, 80)}" not found`);
    const vm = await services.vms.get(found.tenant_id, found.vm_id);
    return { vm, record: await store.get(services.db, vm.vm_id) };
  }

  /** Paused once a pause is under way (as E2B answers right after its pause call) until a start. */
  const state = (vm: VmRow) => (['suspending', 'suspended', 'stopping', 'stopped'].includes(vm.status) ? 'paused' : 'running');

  function listed(vm: VmRow, r: store.SandboxRecord | null) {
    return {
      templateID: r?.template_id ?? 'base',
      sandboxID: previewLabel(vm.vm_id),
      clientID: 'agentvm',
      startedAt: (r?.created_at ?? vm.created_at).toISOString(),
      endAt: (r?.end_at ?? vm.expires_at ?? new Date(vm.created_at.getTime() + DEFAULT_TIMEOUT_S * 1000)).toISOString(),
      cpuCount: vm.vcpus,
      memoryMB: vm.memory_mib,
      diskSizeMB: vm.disk_gib * 1024,
      metadata: r?.metadata ?? {},
      state: state(vm),
      envdVersion: ENVD_VERSION,
      volumeMounts: [],
    };
  }

  const created = (vm: VmRow, r: store.SandboxRecord) => ({
    templateID: r.template_id,
    sandboxID: previewLabel(vm.vm_id),
    clientID: 'agentvm',
    envdVersion: ENVD_VERSION,
    envdAccessToken: r.access_token,
    trafficAccessToken: r.traffic_token,
    domain: domain(),
  });

  /** The timeout takes effect: the VM's expiry (destroy), or, with autoPause, the pause sweep (e2b/server.ts). */
  async function setTimeoutOf(vm: VmRow, record: store.SandboxRecord | null, seconds: number): Promise<Date> {
    const end = new Date(services.clock.now().getTime() + seconds * 1000);
    if (record) await store.setEnd(services.db, vm.vm_id, end);
    if (!record?.auto_pause) await services.vms.updateTimers(vm.tenant_id, vm.vm_id, { expires_at: end.toISOString() });
    return end;
  }

  async function create(c: Context<Env>) {
    writable(c);
    const principal = c.get('principal');
    const body = (await c.req.json().catch(() => null)) as Record<string, unknown> | null;
    if (!body || typeof body !== 'object' || Array.isArray(body)) return e2bError(c, 400, 'body: send a JSON object');
    const templateID = body.templateID;
    if (typeof templateID !== 'string' || !templateID || templateID.length > 100) return e2bError(c, 400, 'templateID: give a template');
    const timeout = timeoutOf(body.timeout);
    if (timeout === null) return e2bError(c, 400, `timeout: whole seconds from 0 to ${MAX_TIMEOUT_S}`);
    const metadata = stringMap(body.metadata);
    const envVars = stringMap(body.envVars);
    if (!metadata || !envVars) return e2bError(c, 400, 'metadata and envVars: objects of strings');
    const autoPause = body.autoPause === true;
    const autoResume = typeof body.autoResume === 'object' && body.autoResume !== null && (body.autoResume as { enabled?: unknown }).enabled === true;
    // E2B's autoPauseMemory: false pauses at the timeout with the filesystem only (a stop; the resume boots).
    if (body.autoPauseMemory !== undefined && body.autoPauseMemory !== null && typeof body.autoPauseMemory !== 'boolean') return e2bError(c, 400, 'autoPauseMemory: true or false');
    const autoPauseMemory = body.autoPauseMemory !== false;
    // E2B's network: allowPublicTraffic (its default true) and maskRequestHost (the Host the sandbox's apps get).
    const network = (body.network ?? {}) as { allowPublicTraffic?: unknown; maskRequestHost?: unknown; allowOut?: unknown; denyOut?: unknown };
    const mask = network.maskRequestHost ?? null;
    // Its egress: allow_internet_access false is none; "deny all, allow these hosts" an allowlist; no rule the harness's default policy.
    const policy = egressFrom(network, body.allow_internet_access);
    if (typeof policy === 'string') return e2bError(c, 400, policy);
    if (mask !== null && (typeof mask !== 'string' || !validPreviewHost(mask))) return e2bError(c, 400, 'network.maskRequestHost: a host, `${PORT}` for the port: printable characters, no spaces, at most 255');
    if (!autoPauseMemory && autoResume) return e2bError(c, 400, 'autoResume cannot be combined with autoPauseMemory: false: a filesystem-only pause is resumed with connect');

    // templateID: a harness of the catalogue, `base` (the workstation), a snapshot of the tenant's, or an image of the tenant's (id or slug).
    const harness = getHarness(templateID) ? templateID : undefined;
    const snapshot = isSnapshotId(templateID) ? templateID : undefined;
    const image = harness || snapshot || templateID === 'base' ? undefined : templateID;
    // Money as a create with no plan or tier (section 17): a card means starter/monthly, else on-demand credits.
    const billing = await services.billing.get(principal.tenantId);
    const money = billing?.card_on_file ? { plan: 'starter' as const, cycle: 'monthly' as const } : { tier: 'ondemand' as const };
    const now = services.clock.now();
    const end = new Date(now.getTime() + timeout * 1000);
    let vmId: string;
    try {
      const expiry = autoPause ? {} : { expires_at: end.toISOString() };
      const egress = policy ? { egress: policy } : {};
      const start = () =>
        snapshot
          ? // The snapshot's machine and plan (or tier), as createVMFromSnapshot: it resumes its instant with a new identity.
            services.snapshots.startVms(principal.tenantId, snapshot, { ...expiry, ...egress }).then((r) => r.body.vm_ids[0])
          : services.vms
              .create(principal.tenantId, { ...money, ...(harness ? { harness } : {}), ...(image ? { image } : {}), ...expiry, ...(autoResume ? { auto_resume: true } : {}), ...egress })
              .then((r) => r.body.vm_id);
      vmId = await untilRoom(c.req.raw.signal, start);
    } catch (err) {
      if (e2bErrorOf(err)?.status === 400 && /image/.test((err as Error).message)) return e2bError(c, 404, `template "${templateID}" not found`);
      if (snapshot && (err as { code?: string }).code === 'not_found') return e2bError(c, 404, `template "${templateID}" not found`);
      throw err;
    }
    // allowPublicTraffic: every port of the sandbox public; false keeps them private (section 16),
    // reached with the VM's preview token, which E2B calls its traffic access token.
    const isPrivate = network.allowPublicTraffic === false;
    const record: store.SandboxRecord = {
      vm_id: vmId,
      tenant_id: principal.tenantId,
      template_id: templateID,
      access_token: `ea_${randomBytes(24).toString('hex')}`,
      traffic_token: isPrivate ? await services.previews.rotateToken(principal.tenantId, vmId) : null,
      metadata,
      env_vars: envVars,
      auto_pause: autoPause,
      auto_pause_memory: autoPauseMemory,
      end_at: end,
      created_at: now,
    };
    await store.insert(services.db, record);
    if (!isPrivate) await services.previews.setAllPortsPublic(vmId, true);
    if (mask !== null) await services.previews.setPreviewHost(vmId, mask as string);
    const vm = await services.vms.waitFor(principal.tenantId, vmId, 'running', START_WAIT_MS, c.req.raw.signal);
    if (vm.status !== 'running') return e2bError(c, 500, `the sandbox did not start: it is ${vm.status}${vm.status_reason ? ` (${vm.status_reason})` : ''}`);
    // The base image has E2B's home (a link to the workspace); an image of the tenant's or a snapshot
    // may have been made over an older base that did not.
    if (image || snapshot) await prepare(vm.tenant_id, vm.vm_id);
    return c.json(created(vm, record), 201);
  }

  snapshotRoutes(app, services, { vmOf, writable });

  networkRoute(app, services, { vmOf, writable });
  forkRoute(app, services, log, { vmOf, writable, created, startWaitMs: START_WAIT_MS });

  app.post('/sandboxes', create);
  app.post('/v2/sandboxes', create);

  listRoutes(app, services, { listed, state });

  app.get('/sandboxes/:sandboxID', async (c) => {
    const { vm, record } = await vmOf(c);
    const network = { ...networkOf(vm.egress), allowPublicTraffic: await services.previews.allPortsPublic(vm.vm_id), ...(vm.preview_host ? { maskRequestHost: vm.preview_host } : {}) };
    return c.json({ ...listed(vm, record), envdAccessToken: record?.access_token, domain: domain(), allowInternetAccess: vm.egress.mode !== 'none', network });
  });

  app.delete('/sandboxes/:sandboxID', async (c) => {
    writable(c);
    const { vm } = await vmOf(c);
    forgetProcesses(vm.vm_id);
    await services.vms.destroy(vm.tenant_id, vm.vm_id);
    return c.body(null, 204);
  });

  app.post('/sandboxes/:sandboxID/timeout', async (c) => {
    writable(c);
    const body = (await c.req.json().catch(() => null)) as { timeout?: unknown } | null;
    const t = body && typeof body === 'object' ? timeoutOf(body.timeout ?? null) : null;
    if (t === null || body?.timeout === undefined) return e2bError(c, 400, `timeout: whole seconds from 0 to ${MAX_TIMEOUT_S}`);
    const { vm, record } = await vmOf(c);
    await setTimeoutOf(vm, record, t);
    return c.body(null, 204);
  });

  app.post('/sandboxes/:sandboxID/refreshes', async (c) => {
    writable(c);
    const body = (await c.req.json().catch(() => ({}))) as { duration?: unknown };
    const t = timeoutOf(body?.duration ?? null);
    if (t === null) return e2bError(c, 400, 'duration: whole seconds');
    const { vm, record } = await vmOf(c);
    await setTimeoutOf(vm, record, t);
    return c.body(null, 204);
  });

  app.post('/sandboxes/:sandboxID/pause', async (c) => {
    writable(c);
    const { vm, record } = await vmOf(c);
    if (state(vm) === 'paused') return e2bError(c, 409, `sandbox ${previewLabel(vm.vm_id)} is already paused`);
    // `memory: false`: the filesystem only (E2B's keepMemory: false), a stop; the resume boots it.
    const body = (await c.req.json().catch(() => ({}))) as { memory?: unknown } | null;
    if (body?.memory !== undefined && body.memory !== null && typeof body.memory !== 'boolean') return e2bError(c, 400, 'memory: true or false');
    const keepMemory = body?.memory !== false;
    // A pause that keeps the memory keeps the processes (the guest runs them on at the resume, and a
    // Connect follows one again); one that keeps the filesystem only ends them.
    if (!keepMemory) forgetProcesses(vm.vm_id);
    await services.vms.lifecycle(vm.tenant_id, vm.vm_id, keepMemory ? 'suspend' : 'stop');
    // As E2B's: a paused sandbox is kept past the end its timeout set (the VM's expiry would destroy it);
    // its resume sets a new one (setTimeoutOf).
    if (record && !record.auto_pause) await services.vms.updateTimers(vm.tenant_id, vm.vm_id, { expires_at: null });
    await services.vms.waitFor(vm.tenant_id, vm.vm_id, keepMemory ? 'suspended' : 'stopped', START_WAIT_MS, c.req.raw.signal);
    return c.body(null, 204);
  });

  /** Resume (v1) and connect (v2): a paused sandbox runs again; a running one is answered as it is. */
  async function resume(c: Context<Env>, alreadyRunning: number) {
    writable(c);
    const body = (await c.req.json().catch(() => ({}))) as { timeout?: unknown; memory?: unknown };
    const t = body?.timeout === undefined ? null : timeoutOf(body.timeout);
    if (body?.timeout !== undefined && t === null) return e2bError(c, 400, 'timeout: whole seconds');
    if (body?.memory !== undefined && body.memory !== null && typeof body.memory !== 'boolean') return e2bError(c, 400, 'memory: true or false');
    // E2B's `onResume: 'reboot'`: a sandbox paused with its memory boots afresh (its processes end).
    const reboot = body?.memory === false;
    const { vm, record } = await vmOf(c);
    if (!record) return e2bError(c, 404, `sandbox ${previewLabel(vm.vm_id)} was not made through E2B's API`);
    let status = alreadyRunning;
    const wasPaused = state(vm) === 'paused';
    if (wasPaused) {
      if (alreadyRunning === 409 && vm.status === 'running') return e2bError(c, 409, 'sandbox is already running');
      if (reboot && vm.desired_state === 'suspended') {
        forgetProcesses(vm.vm_id);
        await services.vms.lifecycle(vm.tenant_id, vm.vm_id, 'restart');
      } else await services.vms.lifecycle(vm.tenant_id, vm.vm_id, 'start');
      status = 201;
    } else if (alreadyRunning === 409) return e2bError(c, 409, `sandbox ${previewLabel(vm.vm_id)} is already running`);
    // A running sandbox's end only moves later (E2B's connect never shortens it); a resumed one's is set
    // (to the default when none is given: its old end has passed, and its timeout would pause it again).
    const current = record.end_at.getTime();
    if (wasPaused) await setTimeoutOf(vm, record, t ?? DEFAULT_TIMEOUT_S);
    else if (t !== null && services.clock.now().getTime() + t * 1000 > current) await setTimeoutOf(vm, record, t);
    const now = await services.vms.waitFor(vm.tenant_id, vm.vm_id, 'running', START_WAIT_MS, c.req.raw.signal);
    if (now.status !== 'running') return e2bError(c, 500, `the sandbox did not start: it is ${now.status}`);
    return c.json(created(now, record), status as 201);
  }
  app.post('/sandboxes/:sandboxID/resume', (c) => resume(c, 409));
  app.post('/sandboxes/:sandboxID/connect', (c) => resume(c, 200));
  app.post('/v2/sandboxes/:sandboxID/connect', (c) => resume(c, 200));

  /** The VM's latest sample (the host keeps one, taken every few seconds), at its own time; `start`/`end` (Unix seconds) bound it. */
  app.get('/sandboxes/:sandboxID/metrics', async (c) => {
    const { vm } = await vmOf(c);
    const bound = (name: string) => {
      const v = c.req.query(name);
      if (v === undefined) return null;
      if (!/^\d{1,12}$/.test(v)) throw new E2bError(400, `${name}: Unix seconds`);
      return Number(v) * 1000;
    };
    const [start, end] = [bound('start'), bound('end')];
    const m = await services.vms.metrics(vm.tenant_id, vm.vm_id).catch(() => null);
    if (!m) return c.json([]);
    const at = new Date(m.sample.sampled_at);
    // Whole seconds: a sample within the second `end` names is in.
    if ((start !== null && at.getTime() < start) || (end !== null && at.getTime() >= end + 1000)) return c.json([]);
    return c.json([
      {
        timestamp: at.toISOString(),
        timestampUnix: Math.floor(at.getTime() / 1000),
        cpuCount: vm.vcpus,
        cpuUsedPct: Number(m.sample.cpu_percent ?? 0),
        memTotal: vm.memory_mib * 1024 * 1024,
        memUsed: Math.round(Number(m.sample.memory_used_mib ?? 0) * 1024 * 1024),
        diskTotal: vm.disk_gib * 1024 ** 3,
        diskUsed: Number(m.sample.disk_used_bytes ?? 0),
      },
    ]);
  });

  app.get('/sandboxes/:sandboxID/logs', async (c) => {
    await vmOf(c);
    return c.json({ logs: [], logEntries: [] });
  });

  return app;
}
