/**
 * The VM host inside `agentvm serve`: its identity and capacity row, the guest image (built on the
 * first start when missing), the QEMU driver and the reconciler.
 */
import { readFile, writeFile, statfs } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Config } from './config.ts';
import type { Services } from './domain/services.ts';
import type { Logger } from './log.ts';
import { newId } from './domain/ids.ts';
import { buildImage, currentImageId, loadImage, type Image } from './image/build.ts';
import { probeDriver, type DriverProbe } from './vmm/probe.ts';
import { QemuDriver } from './vmm/qemu.ts';
import { SnapshotStore } from './vmm/snapshot.ts';
import { PLANS } from './domain/plans.ts';
import { Reconciler } from './reconcile/reconciler.ts';
import { Capturer } from './reconcile/capture.ts';
import type { ExecResult } from './guest/protocol.ts';

export interface VmHost {
  hostId: string;
  driver: QemuDriver | null;
  reconciler: Reconciler | null;
  capturer?: Capturer;
  snapshots?: SnapshotStore | null;
  /** Resolves once the starter shape's snapshot has been made (or could not be), after the image. */
  prewarmed?: Promise<void>;
  /** What /readyz reports: usable once QEMU is there and the guest image is built. */
  probe(): Promise<DriverProbe>;
  /** Resolves when the guest image is ready (rejects if building it failed). */
  imageReady: Promise<Image>;
  close(opts?: { stopVms?: boolean }): Promise<void>;
}

async function hostId(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'host-id');
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (saved) return saved;
  const id = newId('host');
  await writeFile(file, `${id}\n`);
  return id;
}

/**
 * What this host offers. Defaults: 4 vCPUs per core (agents mostly wait), the machine's memory less
 * 1 GiB for itself, and 4× the data dir's free space in disk (persist disks are sparse).
 */
async function capacity(config: Config) {
  const fs = await statfs(config.dataDir);
  const freeGib = Math.floor((fs.bavail * fs.bsize) / 2 ** 30);
  return {
    vcpus_total: config.hostVcpus ?? os.cpus().length * 4,
    memory_mib_total: config.hostMemoryMib ?? Math.max(1024, Math.floor(os.totalmem() / 2 ** 20) - 1024),
    disk_gib_total: config.hostDiskGib ?? freeGib * 4,
  };
}

/** Marks this data dir's host as draining (or not): placement skips it; its VMs stay. Needs DATABASE_URL. */
export async function drainHost(config: Config, draining: boolean): Promise<string> {
  if (!config.databaseUrl) throw new Error('draining a host needs DATABASE_URL (the PostgreSQL server the hosts share)');
  const id = (await readFile(path.join(config.dataDir, 'host-id'), 'utf8').catch(() => '')).trim();
  if (!id) throw new Error(`no host has run with the data dir ${config.dataDir}`);
  const { openDb } = await import('./store/db.ts');
  const db = await openDb({ databaseUrl: config.databaseUrl });
  try {
    const rows = await db.query('UPDATE hosts SET draining = $2 WHERE host_id = $1 RETURNING host_id', [id, draining]);
    if (rows.length === 0) throw new Error(`host ${id} is not registered in this database`);
  } finally {
    await db.close();
  }
  return id;
}

export async function startVmHost(config: Config, services: Services, log: Logger): Promise<VmHost> {
  const id = await hostId(config.dataDir);
  const probe = await probeDriver();
  if (!probe.usable || !probe.accel || !probe.qemu) {
    log.warn({ detail: probe.detail }, 'VM driver not usable: VMs cannot run here and /readyz answers 503');
    return {
      hostId: id,
      driver: null,
      reconciler: null,
      probe: async () => probe,
      imageReady: Promise.reject(new Error(probe.detail)),
      close: async () => undefined,
    };
  }
  log.info({ accel: probe.accel, qemu: probe.qemu }, `VM driver: ${probe.detail}`);

  let image: Image | null = null;
  let imageState = 'looking for the guest image';
  const imageReady = (async () => {
    const wanted = await currentImageId();
    const found = await loadImage(config.imageDir, wanted);
    if (found) return found;
    if (!config.imageAutoBuild) {
      imageState = `no guest image ${wanted} in ${config.imageDir}; run \`agentvm image build\``;
      throw new Error(imageState);
    }
    imageState = `building guest image ${wanted}`;
    log.info({ image_dir: config.imageDir }, 'no guest image yet: building it (first start only)');
    return buildImage(config.imageDir, (msg) => {
      imageState = msg;
      log.info(`image: ${msg}`);
    });
  })();
  imageReady.catch(() => undefined);

  const driver = new QemuDriver({
    vmsDir: path.join(config.dataDir, 'vms'),
    blankDir: path.join(config.dataDir, 'blank'),
    qemu: probe.qemu,
    accel: probe.accel,
    egress: config.vmEgress,
    bootTimeoutMs: config.bootTimeoutMs,
    log: (msg, fields) => log.warn(fields ?? {}, msg),
  });
  const reconciler = new Reconciler({
    db: services.db,
    clock: services.clock,
    driver,
    billing: services.billing,
    hosts: services.hosts,
    hostId: id,
    log,
    image: async (imageId) => (imageId ? loadImage(config.imageDir, imageId) : null),
    currentImageId: () => image?.id ?? null,
    meterIntervalMs: config.meterIntervalMs,
    heartbeatMs: Math.min(15_000, Math.floor(config.hostStaleMs / 3)),
  });
  // A host back after being lost (a crash, a network cut): the time the API replicas could not
  // reach its VMs is not charged. Each tier VM's watermark moves on by the gap since the host's last heartbeat.
  const [previous] = await services.db.query<{ heartbeat_at: Date | null }>('SELECT heartbeat_at FROM hosts WHERE host_id = $1', [id]);
  const now = services.clock.now();
  if (config.role === 'host' && previous?.heartbeat_at && now.getTime() - new Date(previous.heartbeat_at).getTime() > config.hostStaleMs) {
    const lost = await services.db.query(
      `UPDATE vms SET metered_until = CASE WHEN metered_until < $2 THEN metered_until + ($3::timestamptz - $2::timestamptz) ELSE $3 END
       WHERE host_id = $1 AND metered_until IS NOT NULL RETURNING vm_id`,
      [id, previous.heartbeat_at, now],
    );
    if (lost.length) log.info({ vms: lost.length, since: previous.heartbeat_at }, 'this host was lost; its VMs are not charged for that time');
  }
  await services.hosts.register({ host_id: id, name: os.hostname(), accel: probe.accel, image_id: null, ...(await capacity(config)) });
  services.vms.onChange = () => reconciler.kick();
  services.runs.executor = {
    harnesses: async (vmId) => driver.facts(vmId)?.harnesses ?? null,
    run: (vmId, args, timeoutMs) => driver.request<ExecResult>(vmId, 'run', args, timeoutMs),
    setSecrets: async (vmId, set) => (await driver.request<{ names: string[] }>(vmId, 'secrets', { set }, 30_000)).names,
  };
  const capturer = new Capturer({
    db: services.db,
    clock: services.clock,
    driver,
    hostId: id,
    templatesDir: config.templateDir,
    scrubDir: path.join(config.dataDir, 'scrub'),
    log,
    image: () => image,
  });
  await capturer.failInterrupted();
  services.templates.capturer = (templateId) => capturer.start(templateId);
  await reconciler.start();

  let resolvePrewarmed: (p: Promise<void>) => void = () => undefined;
  const prewarmed = new Promise<void>((resolve) => (resolvePrewarmed = (p) => void p.then(resolve, resolve)));
  if (!config.snapshots) resolvePrewarmed(Promise.resolve());
  imageReady.catch(() => resolvePrewarmed(Promise.resolve()));
  const snapshots = config.snapshots
    ? new SnapshotStore({ dir: path.join(config.dataDir, 'snapshots'), driver, log: (msg, fields) => log.info(fields ?? {}, msg) })
    : null;
  imageReady.then(
    async (img) => {
      if (snapshots) {
        // Snapshots of other images go; the starter shape (also the tiers') is made ahead of need.
        await snapshots.init(img.id).catch((err) => log.warn({ err }, 'reading the snapshots failed'));
        driver.snapshots = snapshots;
        const starter = PLANS.starter;
        snapshots.want({ vmId: 'golden', vcpus: starter.vcpus, memoryMib: starter.memory_mib, diskGib: starter.disk_gib, image: img, netSlot: 0, hostname: 'agentvm' });
        resolvePrewarmed(snapshots.settled());
      }
      image = img;
      imageState = `guest image ${img.id}`;
      await services.hosts.heartbeat(id, img.id);
      log.info({ image_id: img.id, kernel: img.manifest.kernel_release }, 'guest image ready');
      reconciler.kick();
    },
    (err: Error) => {
      if (!config.imageAutoBuild) {
        log.warn(imageState);
        return;
      }
      imageState = `the guest image could not be built: ${err.message}`;
      log.error({ err }, 'building the guest image failed; run `agentvm image build` to see why');
    },
  );

  return {
    hostId: id,
    driver,
    reconciler,
    imageReady,
    probe: async () =>
      image
        ? { ...probe, detail: `${probe.detail}; ${imageState}` }
        : { ...probe, usable: false, detail: `${probe.detail}; ${imageState}` },
    capturer,
    snapshots,
    prewarmed,
    close: async (opts) => {
      await snapshots?.close();
      await capturer.settled();
      await reconciler.stop();
      if (opts?.stopVms) await driver.stopAll();
      else driver.release();
    },
  };
}
