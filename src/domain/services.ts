import type { Db } from '../store/db.ts';
import { systemClock, type Clock } from './clock.ts';
import { KeyService } from './keys.ts';
import { TenantService } from './tenants.ts';
import { BillingService } from './billing.ts';
import { UsageService } from './usage.ts';
import { VmService } from './vms.ts';
import { HostService, HOST_STALE_MS } from './hosts.ts';
import { RunService, type RunLimits, type VmExecutor } from './runs.ts';
import { RunFeed } from '../feeds/runFeed.ts';
import { ImageFeed, VmFeed } from '../feeds/feed.ts';
import { ImageService } from './images.ts';
import { LoginService, type Mailer } from './login.ts';
import { FileService, ShellService, type GuestAccess } from './guestAccess.ts';
import { PreviewService } from './previews.ts';
import type { PortAccess } from './previewAccess.ts';
import { TemplateService } from './templates.ts';
import { SnapshotService, type SnapshotHost } from './snapshots.ts';
import { EventService } from './events.ts';
import { WebhookService } from './webhooks.ts';
import { SessionService } from './sessions.ts';
import { LedgerPaymentProvider, type PaymentProvider } from './payments.ts';
import { LimitService } from './limits.ts';
import { noBaseImage, type BaseImageSource } from './baseImage.ts';

export const DEFAULT_RUN_LIMITS: RunLimits = { timeoutMs: 30 * 60_000, maxOutputBytes: 4 * 1024 * 1024, maxQueued: 16 };

/** The domain, wired: what handlers call. */
export interface Services {
  db: Db;
  clock: Clock;
  keys: KeyService;
  tenants: TenantService;
  billing: BillingService;
  usage: UsageService;
  vms: VmService;
  previews: PreviewService;
  hosts: HostService;
  runs: RunService;
  runFeed: RunFeed;
  vmFeed: VmFeed;
  files: FileService;
  shells: ShellService;
  login: LoginService;
  templates: TemplateService;
  events: EventService;
  webhooks: WebhookService;
  /** Web console sign-ins. */
  sessions: SessionService;
  /** Per-tenant limits and quotas. */
  limits: LimitService;
  /** Images of tenants' own, built from Dockerfiles. */
  images: ImageService;
  /** Snapshots of running VMs, and branches (decisions section 18). */
  snapshots: SnapshotService;
  driver: () => Promise<DriverHealth>;
  /** The guest image VMs run here, for `GET /v1/api/images/base`. */
  baseImage: BaseImageSource;
}

/** The services a VM host needs too, built first so that the host can be built before the rest. */
export interface CoreServices {
  db: Db;
  clock: Clock;
  billing: BillingService;
  hosts: HostService;
  /** News of runs: the VM's host publishes, followers of a run wake. */
  runFeed: RunFeed;
  /** News of VMs' statuses: the API and the VM's host publish, waits for a status wake. */
  vmFeed: VmFeed;
  /** News of image builds: the builder publishes, followers of a build and idle builders wake. */
  imageFeed: ImageFeed;
}

export function buildCoreServices(db: Db, opts: { clock?: Clock; payments?: PaymentProvider; hostStaleMs?: number } = {}): CoreServices {
  const clock = opts.clock ?? systemClock;
  return {
    db,
    clock,
    billing: new BillingService(db, clock, opts.payments ?? new LedgerPaymentProvider()),
    hosts: new HostService(db, clock, opts.hostStaleMs ?? HOST_STALE_MS),
    runFeed: new RunFeed(db),
    vmFeed: new VmFeed(db),
    imageFeed: new ImageFeed(db),
  };
}

/** Whether VMs can run here, and how: what the driver's probe (vmm/probe.ts) tells of it. */
export interface DriverHealth {
  usable: boolean;
  accel: 'kvm' | 'tcg' | null;
  detail: string;
}

/** Where VMs run, as the domain sees it: this process's host, the replicas' view of remote hosts, or none. */
export interface VmHostPort {
  /** Readiness of VMs here: /readyz. */
  driver: () => Promise<DriverHealth>;
  executor?: VmExecutor | null;
  /** Shells and files in the guests. */
  guest?: GuestAccess | null;
  /** The guests' TCP ports, for previews. */
  ports?: PortAccess | null;
  capture?: ((templateId: string) => void) | null;
  /** Snapshots saved and started on the VMs' hosts (none: snapshot operations are 503). */
  snapshots?: SnapshotHost | null;
  /** An API replica's id: it takes snapshots through their hosts, and fails what it left at its start. */
  snapshotTaker?: string;
  /** A VM's desired state changed. */
  vmsChanged?: () => void;
  /** An image build was queued. */
  imagesQueued?: () => void;
  /** API replicas: VMs of silent hosts show `host_unavailable`. */
  showLostHosts?: boolean;
  /** The guest image this host runs (or the replicas' view of the hosts'); none where no host is attached. */
  baseImage?: BaseImageSource;
}

export function buildServices(
  core: CoreServices,
  host: VmHostPort,
  opts: { runLimits?: RunLimits; mailer?: Mailer; webhookAllowHosts?: Set<string> } = {},
): Services {
  const { db, clock, billing, hosts, runFeed, vmFeed, imageFeed } = core;
  const keys = new KeyService(db, clock);
  const templates = new TemplateService(db, clock, host.capture ?? null);
  const login = new LoginService(db, clock, keys, opts.mailer ?? { send: async () => undefined });
  const images = new ImageService(db, clock, imageFeed, host.imagesQueued);
  const vms = new VmService(db, clock, billing, hosts, templates, { onChange: host.vmsChanged, showLostHosts: host.showLostHosts, feed: vmFeed, images });
  return {
    ...core,
    keys,
    tenants: new TenantService(db, clock, keys),
    usage: new UsageService(db, clock),
    vms,
    runs: new RunService(db, clock, vms, runFeed, opts.runLimits ?? DEFAULT_RUN_LIMITS, host.executor ?? null),
    files: new FileService(vms, host.guest ?? null),
    shells: new ShellService(db, clock, vms, host.guest ?? null),
    previews: new PreviewService(db, clock, vms, keys, host.ports ?? null),
    login,
    sessions: new SessionService(db, clock, login),
    limits: new LimitService(db, clock),
    images,
    snapshots: new SnapshotService(db, clock, billing, vms, host.snapshots ?? null, host.snapshotTaker ?? null),
    templates,
    events: new EventService(db, clock),
    webhooks: new WebhookService(db, clock, opts.webhookAllowHosts ?? new Set()),
    driver: host.driver,
    baseImage: host.baseImage ?? noBaseImage,
  };
}
