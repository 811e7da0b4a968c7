/**
 * Per-tenant limits and quotas (decisions section 14). Each limit has a default the operator changes
 * per tenant. A create checks the limits it would raise inside its own transaction, under the
 * tenant's quota lock (requireQuota): over a limit it is 403 `quota_exceeded` and the transaction,
 * charge included, is rolled back.
 */
import { randomBytes } from 'node:crypto';
import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import { DomainError, notFound } from './errors.ts';
import * as imageStore from '../store/images.ts';
import * as limitStore from '../store/limits.ts';
import * as snapshotStore from '../store/snapshots.ts';

export const LIMIT_NAMES = [
  'vms',
  'running_vms',
  'vcpus',
  'memory_mib',
  'disk_gib',
  'templates',
  'images',
  'snapshots',
  'webhooks',
  'api_keys',
  'run_streams',
] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];
export type Limits = Record<LimitName, number>;
/** What a tenant holds now, by the same names. */
export type LimitUsage = Record<LimitName, number>;
/** What a request would add. */
export type QuotaCharge = Partial<Record<LimitName, number>>;

export const DEFAULT_LIMITS: Limits = {
  vms: 50,
  running_vms: 20,
  vcpus: 64,
  memory_mib: 131_072,
  disk_gib: 1000,
  templates: 200,
  images: 20,
  snapshots: 50,
  webhooks: 20,
  api_keys: 100,
  run_streams: 100,
};

/** The largest value the operator may give a limit. */
export const MAX_LIMIT = 1_000_000_000;

/** What each limit counts, for the documents and the CLI. */
export const LIMIT_DESCRIPTIONS: Record<LimitName, string> = {
  vms: 'VMs not deleted, whatever their status',
  running_vms: 'VMs wanted running (starting, restarting and provisioning included) that have not failed',
  vcpus: 'vCPUs of VMs running or suspended',
  memory_mib: 'Memory (MiB) of VMs running or suspended',
  disk_gib: 'Disk (GiB): persist disks of VMs not deleted, templates (each its source VM\'s disk), your images\' layers, and snapshots (what each holds on its host)',
  templates: 'Templates captured (a failed capture does not count)',
  images: 'Images of your own, queued, building or ready (not failed, not deleted)',
  snapshots: 'Snapshots kept (a branch\'s own saved state is not one, but its disk counts in disk_gib while it is kept)',
  webhooks: 'Webhooks',
  api_keys: 'API keys not revoked',
  run_streams: 'Open run event streams and shells together, on every server',
};

/** What the tenant can do about a limit reached, beside asking the operator. */
const REMEDY: Record<LimitName, string | null> = {
  vms: 'destroy VMs you no longer need',
  running_vms: 'stop or suspend a running VM',
  vcpus: 'stop a running or suspended VM',
  memory_mib: 'stop a running or suspended VM',
  disk_gib: 'destroy VMs you no longer need',
  // No operation deletes a template yet: only the operator frees room.
  templates: null,
  images: 'delete an image',
  snapshots: 'delete a snapshot',
  webhooks: 'delete a webhook you no longer need',
  api_keys: 'revoke keys you no longer use',
  run_streams: 'close an event stream or a shell',
};

export function quotaExceeded(name: LimitName, limit: number, used: number, adds: number): DomainError {
  return new DomainError(
    'quota_exceeded',
    `limit ${name} is ${limit} and the current count is ${used}: this request would add ${adds}`,
    `${REMEDY[name] ? `${REMEDY[name]}, or ` : ''}ask the operator to raise the limit (GET /v1/api/limits shows limits and usage)`,
  );
}

/**
 * Where usage comes from: each counter gives some names, and a name given by several is their sum
 * (disk_gib: VMs' persist disks, templates, images and snapshots).
 */
interface Counter {
  names: readonly LimitName[];
  count(q: Queryable, tenantId: string, now: Date): Promise<Partial<LimitUsage>>;
}

const COUNTERS: Counter[] = [
  { names: ['vms', 'running_vms', 'vcpus', 'memory_mib', 'disk_gib'], count: (q, t) => limitStore.vmUsage(q, t) },
  { names: ['templates', 'disk_gib'], count: (q, t) => limitStore.templateUsage(q, t) },
  {
    names: ['images', 'disk_gib'],
    count: async (q, t) => {
      const u = await imageStore.usage(q, t);
      return { images: u.images, disk_gib: Math.ceil(u.bytes / 1024 ** 3) };
    },
  },
  {
    names: ['snapshots', 'disk_gib'],
    count: async (q, t) => {
      const u = await snapshotStore.usage(q, t);
      return { snapshots: u.snapshots, disk_gib: Math.ceil(u.bytes / 1024 ** 3) };
    },
  },
  { names: ['webhooks'], count: async (q, t) => ({ webhooks: await limitStore.countWebhooks(q, t) }) },
  { names: ['api_keys'], count: async (q, t) => ({ api_keys: await limitStore.countKeys(q, t) }) },
  { names: ['run_streams'], count: async (q, t, now) => ({ run_streams: await limitStore.countStreams(q, t, now) }) },
];

/** The tenant's usage of `names` (all by default); the others are 0. */
export async function usageOf(q: Queryable, tenantId: string, now: Date, names: readonly LimitName[] = LIMIT_NAMES): Promise<LimitUsage> {
  const out = Object.fromEntries(LIMIT_NAMES.map((n) => [n, 0])) as LimitUsage;
  for (const counter of COUNTERS) {
    if (!counter.names.some((n) => names.includes(n))) continue;
    const counted = await counter.count(q, tenantId, now);
    for (const n of counter.names) out[n] += counted[n] ?? 0;
  }
  return out;
}

/** The tenant's limits: the defaults with the operator's overrides. */
export async function limitsOf(q: Queryable, tenantId: string): Promise<Limits> {
  const set = await limitStore.overrides(q, tenantId);
  const out = { ...DEFAULT_LIMITS };
  for (const n of LIMIT_NAMES) if (set[n] !== undefined) out[n] = set[n];
  return out;
}

/**
 * Call inside the create's transaction, before it changes anything the limits count: takes the
 * tenant's quota lock (held to the commit, so a concurrent create counts after this one), counts, and
 * throws 403 quota_exceeded naming the first limit the request would go over. A charge of 0 (a restart
 * of a running VM) is never refused, even under a lowered limit.
 */
export async function requireQuota(tx: Queryable, tenantId: string, charge: QuotaCharge, now: Date): Promise<void> {
  const names = LIMIT_NAMES.filter((n) => (charge[n] ?? 0) > 0);
  if (names.length === 0) return;
  await limitStore.lockQuota(tx, tenantId);
  const limits = await limitsOf(tx, tenantId);
  const used = await usageOf(tx, tenantId, now, names);
  for (const n of names) {
    const adds = charge[n]!;
    if (used[n] + adds > limits[n]) throw quotaExceeded(n, limits[n], used[n], adds);
  }
}

/**
 * After the fact: a thing whose size is known only once made (a snapshot's files) is kept only while
 * the tenant stays within `name` with it counted (`adds`: what it counts). Call under the quota lock.
 */
export async function requireStillWithin(tx: Queryable, tenantId: string, name: LimitName, adds: number, now: Date): Promise<void> {
  const limits = await limitsOf(tx, tenantId);
  const used = (await usageOf(tx, tenantId, now, [name]))[name];
  if (used > limits[name]) throw quotaExceeded(name, limits[name], used - adds, adds);
}

/** What new VMs count: each a VM not deleted and wanted running, with its CPU, memory and persist disk. */
export function orderCharge(order: { count: number; vcpus: number; memory_mib: number; disk_gib: number }): QuotaCharge {
  const n = order.count;
  return { vms: n, running_vms: n, vcpus: n * order.vcpus, memory_mib: n * order.memory_mib, disk_gib: n * order.disk_gib };
}

/** What a VM counts in running_vms, vcpus and memory_mib (as limitStore.vmUsage counts it). */
export function vmCompute(vm: { desired_state: string; status: string; vcpus: number; memory_mib: number }): QuotaCharge {
  const failed = vm.status === 'failed';
  const running = vm.desired_state === 'running' && !failed;
  const holding = (vm.desired_state === 'running' || vm.desired_state === 'suspended') && !failed;
  return { running_vms: running ? 1 : 0, vcpus: holding ? vm.vcpus : 0, memory_mib: holding ? vm.memory_mib : 0 };
}

/** What a lifecycle change adds: the VM after less the VM before, per limit (never below 0). */
export function lifecycleCharge(before: QuotaCharge, after: QuotaCharge): QuotaCharge {
  const out: QuotaCharge = {};
  for (const n of LIMIT_NAMES) out[n] = Math.max(0, (after[n] ?? 0) - (before[n] ?? 0));
  return out;
}

// ---- open event streams and shells ----

/** A stream's lease runs out this long after its last renewal (a process that went away frees it so). */
export const STREAM_LEASE_MS = 60_000;
const RENEW_MS = 20_000;

export type StreamKind = 'events' | 'shell';

/** The lease id of a shell's ticket (the hash of the ticket, never the ticket). */
export const shellLeaseId = (ticketHash: string) => `lse_shell_${ticketHash}`;

/** Takes a stream's lease in `tx` when the tenant has room for one more (403 quota_exceeded if not). */
export async function takeStreamLease(tx: Queryable, lease: { lease_id: string; tenant_id: string; kind: StreamKind; expires_at: Date }, now: Date): Promise<void> {
  await requireQuota(tx, lease.tenant_id, { run_streams: 1 }, now);
  await limitStore.insertLease(tx, lease, now);
}

/**
 * An open stream's lease: renewed while it is open, ended (freeing its place at once) when it closes.
 * A lease that ran out (its renewals stalled for a minute: the database was away) is taken again only
 * where the tenant still has room, as a new stream would be; else it is `lapsed`, and its stream closes.
 */
export class StreamLease {
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  private renewing: Promise<void> = Promise.resolve();
  private ending: Promise<void> | undefined;
  private lapse!: () => void;
  /** Resolves when the lease ran out and the tenant's run_streams were taken meanwhile: close the stream. */
  readonly lapsed = new Promise<void>((resolve) => (this.lapse = resolve));
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    readonly lease: { lease_id: string; tenant_id: string; kind: StreamKind },
    opts: { renewNow?: boolean } = {},
  ) {
    if (opts.renewNow) void this.renew();
    this.timer = setInterval(() => void this.renew(), RENEW_MS);
    this.timer.unref();
  }

  /** Moves the lease's end on (the timer does it every RENEW_MS); resolves when done. */
  renew(): Promise<void> {
    this.renewing = this.renewing.then(() => this.renewOnce()).catch(() => undefined);
    return this.renewing;
  }

  private async renewOnce(): Promise<void> {
    if (this.ended) return;
    const now = this.clock.now();
    const expires_at = new Date(now.getTime() + STREAM_LEASE_MS);
    if (await limitStore.extendLease(this.db, this.lease.lease_id, expires_at, now)) return;
    try {
      await this.db.transaction((tx) => takeStreamLease(tx, { ...this.lease, expires_at }, now));
    } catch (err) {
      if ((err as DomainError).code !== 'quota_exceeded') throw err;
      this.lapse();
      void this.end();
    }
  }

  /** Frees the stream's place (once; a renewal under way finishes first, so it cannot take the lease again). */
  end(): Promise<void> {
    if (!this.ending) {
      this.ended = true;
      clearInterval(this.timer);
      this.ending = this.renewing.then(() => limitStore.endLease(this.db, this.lease.lease_id)).catch(() => undefined);
    }
    return this.ending;
  }
}

/** Limits as the API shows them, the operator's changes, and the leases of open streams. */
export class LimitService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async view(tenantId: string): Promise<{ limits: Limits; usage: LimitUsage }> {
    const limits = await limitsOf(this.db, tenantId);
    const usage = await usageOf(this.db, tenantId, this.clock.now());
    return { limits, usage };
  }

  /** The operator's partial change: a number sets a limit, null gives it back its default. 404 for an unknown tenant. */
  async set(tenantId: string, changes: Partial<Record<LimitName, number | null>>): Promise<{ limits: Limits; usage: LimitUsage }> {
    await this.db.transaction(async (tx) => {
      const [tenant] = await tx.query('SELECT 1 FROM tenants WHERE tenant_id = $1', [tenantId]);
      if (!tenant) throw notFound('tenant');
      const known = Object.fromEntries(Object.entries(changes).filter(([n, v]) => (LIMIT_NAMES as readonly string[]).includes(n) && v !== undefined));
      await limitStore.setOverrides(tx, tenantId, known as Record<string, number | null>, this.clock.now());
    });
    return this.view(tenantId);
  }

  /** Opens a stream's lease (403 quota_exceeded when the tenant has run_streams open already); end it when the stream closes. */
  async openStream(tenantId: string, kind: StreamKind): Promise<StreamLease> {
    const lease = { lease_id: `lse_${kind}_${randomBytes(12).toString('hex')}`, tenant_id: tenantId, kind };
    const now = this.clock.now();
    await this.db.transaction((tx) => takeStreamLease(tx, { ...lease, expires_at: new Date(now.getTime() + STREAM_LEASE_MS) }, now));
    return new StreamLease(this.db, this.clock, lease);
  }
}
