/**
 * The VM host inside `agentvm serve` and `agentvm host`: its registration (its id and capacity:
 * hostRecord.ts), the guest image (built on the first start when missing), the QEMU driver, the
 * reconciler and captures.
 *
 * It is built complete before the server listens (nothing slow happens in the constructor), and
 * `start()` does the slow part in the background: re-adopting the VMs an earlier process left
 * running, loading or building the image, making the first snapshot. `probe()` says what is still
 * in progress, for /readyz.
 */
import { isolating, openDataDirToMachines, QEMU_UID_BASE } from '../vmm/isolation.ts';
import os from 'node:os';
import path from 'node:path';
import type { Config } from '../config.ts';
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { BillingService } from '../domain/billing.ts';
import type { HostService } from '../domain/hosts.ts';
import type { RunFeed } from '../feeds/runFeed.ts';
import type { ImageFeed, VmFeed } from '../feeds/feed.ts';
import { QUEUED } from '../domain/images.ts';
import { ImageBuilder } from './imageBuilder.ts';
import type { VmExecutor } from '../domain/runs.ts';
import type { GuestAccess } from '../domain/guestAccess.ts';
import { LocalGuestAccess } from './guestAccess.ts';
import { capacity } from './hostRecord.ts';
import type { Logger } from '../log.ts';
import { buildImage, currentImageId, loadImage, type Image } from '../image/build.ts';
import type { DriverProbe } from '../vmm/probe.ts';
import { QemuDriver, type MachineOptions } from '../vmm/qemu.ts';
import { SnapshotStore } from '../vmm/snapshot.ts';
import { PLANS } from '../domain/plans.ts';
import { Reconciler } from './reconciler.ts';
import { MetricsSampler } from './metrics.ts';
import { Capturer } from './capture.ts';
import { RunRecorder } from './runRecorder.ts';
import { LocalSnapshots } from './branching.ts';
import type { SnapshotHost } from '../domain/snapshots.ts';
import * as hostStore from '../store/hosts.ts';
import * as vmStore from '../store/vms.ts';
import * as hostVmStore from '../store/vmsOnHost.ts';
import { EgressGateway } from './egress/gateway.ts';
import { HostCredentials } from './egress/credentials.ts';
import type { SecretBox } from './egress/secretBox.ts';

/** What the domain and the internal endpoint need of the machine its VMs run on. */
export interface VmHost {
  hostId: string;
  driver: QemuDriver | null;
  reconciler: Reconciler | null;
  capturer?: Capturer;
  snapshots?: SnapshotStore | null;
  /** Runs and secrets inside this host's guests; null where no VM can run. */
  executor: VmExecutor | null;
  /** Shells and files of this host's guests; null where no VM can run. */
  guest: GuestAccess | null;
  /** Starts the capture of a template whose source VM is here; null where no VM can run. */
  capture: ((templateId: string) => void) | null;
  /** Snapshots of this host's VMs, and VMs started from them (decisions section 18); null where no VM can run. */
  branching?: SnapshotHost | null;
  /** A VM's desired state changed: converge soon. */
  vmsChanged(): void;
  /** An image build was queued: a builder here may take it. */
  imagesQueued?(): void;
  /** Builder VMs kept ready for image builds now. */
  buildersReady?(): number;
  /** Resolves once the starter shape's snapshot has been made (or could not be), after the image. */
  prewarmed?: Promise<void>;
  /** What /readyz reports: usable once QEMU is there, the image is built and the VMs are re-adopted. */
  probe(): Promise<DriverProbe>;
  /** Resolves when the guest image is ready (rejects if it cannot be had). */
  imageReady: Promise<Image>;
  /**
   * The slow part of starting, in the background; resolves when it is done (never rejects).
   * `internalUrl`: where API replicas reach this host (role `host`).
   */
  start(opts?: { internalUrl?: string }): Promise<void>;
  close(opts?: { stopVms?: boolean }): Promise<void>;
}

/** The Debian packages a VM host needs, and how to get them: what /readyz says when they are missing. */
export const INSTALL_HINT = 'as root: `bash scripts/install-debs.sh` (installs qemu-system-x86, qemu-utils and the image tools)';

export interface LocalVmHostDeps {
  config: Config;
  hostId: string;
  /** The driver probe, taken before construction (a PATH look-up and /proc/cpuinfo: milliseconds). */
  probe: DriverProbe;
  db: Db;
  clock: Clock;
  billing: BillingService;
  hosts: HostService;
  runFeed: RunFeed;
  vmFeed: VmFeed;
  imageFeed: ImageFeed;
  log: Logger;
  /** Seals the provider keys this host's gateway brokers. */
  secrets: SecretBox;
}

/** A machine where no VM can run (no QEMU): the API still answers; /readyz says what to install. */
export function unusableVmHost(hostId: string, probe: DriverProbe, log: Logger): VmHost {
  const detail = `${probe.detail}; ${INSTALL_HINT}`;
  const imageReady = Promise.reject(new Error(detail));
  imageReady.catch(() => undefined);
  return {
    hostId,
    driver: null,
    reconciler: null,
    executor: null,
    guest: null,
    capture: null,
    vmsChanged: () => undefined,
    probe: async () => ({ ...probe, usable: false, detail }),
    imageReady,
    start: async () => void log.warn({ detail }, 'VM driver not usable: VMs cannot run here and /readyz answers 503'),
    close: async () => undefined,
  };
}

export class LocalVmHost implements VmHost {
  readonly hostId: string;
  readonly driver: QemuDriver;
  readonly reconciler: Reconciler;
  readonly capturer: Capturer;
  readonly snapshots: SnapshotStore | null;
  readonly executor: VmExecutor;
  readonly guest: GuestAccess;
  readonly gateway: EgressGateway;
  readonly runs: RunRecorder;
  readonly metrics: MetricsSampler;
  readonly capture: (templateId: string) => void;
  readonly branching: LocalSnapshots;
  readonly images: ImageBuilder;
  readonly imageReady: Promise<Image>;
  readonly prewarmed: Promise<void>;
  private image: Image | null = null;
  private imageState = 'looking for the guest image';
  /** Start-up work still under way, by name, for /readyz. */
  private readonly pending = new Set<string>(['re-adopting VMs']);
  private started?: Promise<void>;
  private adopted?: Promise<void>;
  private closing = false;
  private stopWatchingBuilds: () => void = () => undefined;
  private resolveImage!: (image: Promise<Image>) => void;
  private resolvePrewarmed!: () => void;

  constructor(private readonly d: LocalVmHostDeps) {
    const { config, probe, log } = d;
    this.hostId = d.hostId;
    const credentials = new HostCredentials(d.db, d.secrets);
    this.gateway = new EgressGateway({ db: d.db, credentials, providerUrls: config.providerUrls, pins: config.egressPins, log });
    const machine: MachineOptions = { qemu: probe.qemu!, accel: probe.accel!, gateway: { port: this.gateway }, bootTimeoutMs: config.bootTimeoutMs };
    this.snapshots = config.snapshots
      ? new SnapshotStore({ dir: path.join(config.dataDir, 'snapshots'), machine, log: (msg, fields) => log.info(fields ?? {}, msg) })
      : null;
    this.driver = new QemuDriver({
      ...machine,
      vmsDir: path.join(config.dataDir, 'vms'),
      blankDir: path.join(config.dataDir, 'blank'),
      snapshots: this.snapshots,
      log: (msg, fields) => log.warn(fields ?? {}, msg),
      standby: this.snapshots ? config.standbyVms : 0,
      standbyImages: this.snapshots ? config.standbyImages : 0,
      standbyIdleShare: config.standbyIdleShare,
      standbySlotsHeld: () => vmStore.heldStandbySlots(d.db, d.hostId),
    });
    this.reconciler = new Reconciler({
      db: d.db,
      clock: d.clock,
      driver: this.driver,
      billing: d.billing,
      hosts: d.hosts,
      hostId: d.hostId,
      feed: d.vmFeed,
      log,
      image: async (imageId) => (imageId ? loadImage(config.imageDir, imageId) : null),
      currentImageId: () => this.image?.id ?? null,
      meterIntervalMs: config.meterIntervalMs,
      heartbeatMs: Math.min(15_000, Math.floor(config.hostStaleMs / 3)),
    });
    this.capturer = new Capturer({
      db: d.db,
      clock: d.clock,
      driver: this.driver,
      hostId: d.hostId,
      templatesDir: config.templateDir,
      scrubDir: path.join(config.dataDir, 'scrub'),
      log,
      image: () => this.image,
    });
    this.images = new ImageBuilder({
      db: d.db,
      clock: d.clock,
      driver: this.driver,
      gateway: this.gateway,
      hostId: d.hostId,
      layersDir: path.join(config.dataDir, 'image-layers'),
      buildDir: path.join(config.dataDir, 'builds'),
      standbyBuilders: this.snapshots ? config.standbyBuilders : 0,
      feed: d.imageFeed,
      log,
      image: () => this.image,
    });
    const driver = this.driver;
    const runs = new RunRecorder({ db: d.db, clock: d.clock, driver, hostId: d.hostId, feed: d.runFeed, log });
    this.runs = runs;
    this.metrics = new MetricsSampler({ db: d.db, clock: d.clock, driver, hostId: d.hostId, log, intervalMs: config.metricsIntervalMs });
    this.executor = {
      harnesses: async (vmId) => driver.facts(vmId)?.harnesses ?? null,
      kickRuns: (vmId) => runs.kick(vmId),
      cancelRun: (vmId, runId) => runs.cancel(vmId, runId),
      setSecrets: (vmId, set) => credentials.apply(vmId, set, async (guest) => (await driver.request<{ names: string[] }>(vmId, 'secrets', { set: guest }, 30_000)).names),
    };
    this.guest = new LocalGuestAccess(driver);
    this.branching = new LocalSnapshots({ db: d.db, credentials, hostId: d.hostId, dir: path.join(config.dataDir, 'vm-snapshots'), driver, adopted: () => this.adopted, log });
    this.capture = (templateId) => this.capturer.start(templateId);
    this.imageReady = new Promise<Image>((resolve) => (this.resolveImage = resolve));
    this.imageReady.catch(() => undefined);
    this.prewarmed = new Promise<void>((resolve) => (this.resolvePrewarmed = resolve));
  }

  vmsChanged(): void {
    this.reconciler.kick();
  }

  imagesQueued(): void {
    this.images.kick();
  }

  buildersReady(): number {
    return this.images.buildersReady();
  }

  start(opts: { internalUrl?: string } = {}): Promise<void> {
    this.started ??= this.startUp(opts.internalUrl ?? null);
    return this.started;
  }

  /**
   * Every QEMU runs as a user of its own with only its VM directory open to it (src/vmm/isolation.ts):
   * the data dir is passable on the way to the directories QEMUs use, and nothing else in it is
   * theirs to read. A control plane that is not root cannot do that: it says so.
   */
  private async isolateMachines(): Promise<void> {
    const { config, log } = this.d;
    if (!isolating()) {
      log.warn({ uid: process.getuid?.() }, 'QEMU runs as this server\'s own user (only a server started as root runs each VM\'s QEMU as a user of its own); its seccomp sandbox is on');
      return;
    }
    const d = config.dataDir;
    const opened = await openDataDirToMachines(d, ['vms', 'blank', 'snapshots', 'scrub', 'image-layers', 'builds'].map((n) => path.join(d, n)).concat(config.imageDir, config.templateDir));
    if (opened.length) log.warn({ folders: opened }, 'folders above the data dir were made searchable by other users (o+x, not listable) so that VMs\' QEMU users reach their own folders');
    log.info({ uid_base: QEMU_UID_BASE }, 'each VM\'s QEMU runs as a user of its own, in its seccomp sandbox');
  }

  /** Registers the host (placement may use it at once), then re-adopts VMs and gets the image side by side. */
  private async startUp(internalUrl: string | null): Promise<void> {
    const { config, log } = this.d;
    try {
      await this.forgiveLostTime();
      await this.d.hosts.register({ host_id: this.hostId, name: os.hostname(), accel: this.d.probe.accel!, image_id: null, internal_url: internalUrl, ...(await capacity(config)) });
    } catch (err) {
      log.error({ err }, 'registering this VM host failed');
    }
    if (this.closing) return;
    log.info({ accel: this.d.probe.accel, qemu: this.d.probe.qemu }, `VM driver: ${this.d.probe.detail}`);
    await this.isolateMachines().catch((err) => log.error({ err }, 'opening the data dir to QEMU users failed'));
    const image = this.loadOrBuildImage();
    this.resolveImage(image);
    const adopted = (async () => {
      await this.capturer.failInterrupted();
      await this.branching.sweep().catch((err) => log.error({ err }, 'sweeping snapshots cut short failed'));
      if (!this.closing) this.branching.startSweeping();
      await this.reconciler.start();
      // Runs are followed once the VMs an earlier process left running are this process's again.
      if (!this.closing) this.runs.start();
      if (!this.closing) this.metrics.start();
    })()
      .catch((err) => log.error({ err }, 're-adopting VMs failed'))
      .finally(() => this.pending.delete('re-adopting VMs'));
    this.adopted = adopted;
    await Promise.all([adopted, image.then((img) => this.imageLoaded(img), (err: Error) => this.imageFailed(err))]);
  }

  /**
   * A host back after being lost (a crash, a network cut): the time the API replicas could not reach
   * its VMs is not charged. Each tier VM's watermark moves on by the gap since the last heartbeat.
   */
  private async forgiveLostTime(): Promise<void> {
    const { config, db, clock, log } = this.d;
    if (config.role !== 'host') return;
    const lastHeartbeat = await hostStore.lastHeartbeat(db, this.hostId);
    const now = clock.now();
    if (!lastHeartbeat || now.getTime() - new Date(lastHeartbeat).getTime() <= config.hostStaleMs) return;
    const lost = await db.transaction(async (tx) => {
      await hostStore.recordLoss(tx, this.hostId, lastHeartbeat, now);
      return hostVmStore.forgiveLostTime(tx, this.hostId, lastHeartbeat, now);
    });
    if (lost.length) log.info({ vms: lost.length, since: lastHeartbeat }, 'this host was lost; its VMs are not charged for that time');
  }

  private async loadOrBuildImage(): Promise<Image> {
    const { config, log } = this.d;
    const wanted = await currentImageId();
    const found = await loadImage(config.imageDir, wanted);
    if (found) return found;
    if (!config.imageAutoBuild) {
      this.imageState = `no guest image ${wanted} in ${config.imageDir}; run \`agentvm image build\``;
      throw new Error(this.imageState);
    }
    this.imageState = `building guest image ${wanted}`;
    log.info({ image_dir: config.imageDir }, 'no guest image yet: building it (first start only)');
    return buildImage(config.imageDir, (msg) => {
      this.imageState = msg;
      log.info(`image: ${msg}`);
    });
  }

  private async imageLoaded(img: Image): Promise<void> {
    const { log } = this.d;
    if (this.snapshots) {
      // Snapshots of other images go; the starter shape (also the tiers') is made ahead of need.
      // Until then every start boots cold (the store answers nothing before it has read its dir).
      await this.snapshots.init(img.id).catch((err) => log.warn({ err }, 'reading the snapshots failed'));
      const starter = PLANS.starter;
      this.snapshots.want({ vmId: 'golden', vcpus: starter.vcpus, memoryMib: starter.memory_mib, diskGib: starter.disk_gib, image: img, netSlot: 0, hostname: 'agentvm' });
      void this.snapshots.settled().then(() => {
        this.resolvePrewarmed();
        // New starter VMs take standbys made ahead of need (also the tiers' shape).
        if (!this.closing) this.driver.keepStandby({ image: img, vcpus: starter.vcpus, memoryMib: starter.memory_mib, diskGib: starter.disk_gib });
      });
    } else {
      this.resolvePrewarmed();
    }
    this.image = img;
    this.imageState = `guest image ${img.id}`;
    await this.d.hosts.heartbeat(this.hostId, img.id).catch((err) => log.warn({ err }, 'writing the heartbeat failed'));
    log.info({ image_id: img.id, kernel: img.manifest.kernel_release }, 'guest image ready');
    // VMs that waited for the image are taken again now, not at their next retry.
    this.reconciler.wake();
    // Image builds wait for the guest image too; a build queued through another replica wakes them.
    if (!this.closing) {
      this.stopWatchingBuilds = this.d.imageFeed.watch(QUEUED, () => this.images.kick());
      await this.images.start().catch((err) => log.error({ err }, 'starting image builds failed'));
    }
  }

  private imageFailed(err: Error): void {
    const { config, log } = this.d;
    this.resolvePrewarmed();
    if (!config.imageAutoBuild) {
      log.warn(this.imageState);
      return;
    }
    this.imageState = `the guest image could not be built: ${err.message}; see why with \`agentvm image build\` (${INSTALL_HINT})`;
    log.error({ err }, 'building the guest image failed; run `agentvm image build` to see why');
  }

  async probe(): Promise<DriverProbe> {
    const probe = this.d.probe;
    const waiting = [...this.pending].map((p) => `${p} in progress`);
    const detail = [probe.detail, this.imageState, ...waiting].join('; ');
    return { ...probe, usable: this.image !== null && this.pending.size === 0, detail };
  }

  async close(opts?: { stopVms?: boolean }): Promise<void> {
    this.closing = true;
    this.branching.stopSweeping();
    await this.driver.dropStandbys();
    await this.snapshots?.close();
    await this.capturer.settled();
    this.stopWatchingBuilds();
    await this.images.close();
    await this.runs.stop();
    await this.metrics.stop();
    await this.reconciler.stop();
    // An adoption under way ends before the VMs are let go.
    await this.adopted;
    if (opts?.stopVms) await this.driver.stopAll();
    else this.driver.release();
    await this.gateway.close();
  }
}
