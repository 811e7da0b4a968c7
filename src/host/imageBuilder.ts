/**
 * Image builds on a VM host: a queued build is taken here, and its Dockerfile's steps run in a builder
 * VM of its own (a microVM like any tenant's, started from the same golden snapshot, its network
 * through the gateway under the build's egress policy), as root unless a USER says otherwise.
 *
 * An image is the writable layer of a VM's root: after each step that changes files (RUN, COPY, ADD,
 * WORKDIR) the builder's root is flushed and what the step wrote is kept as a qcow2 layer over the
 * layer before it (the file the builder wrote, given a new top: vmm/buildLayers.ts). Those layers are
 * the step cache: a step whose parent layer and text (and, for a COPY, the bytes it copies) are
 * unchanged is taken from it, and a build whose every step is cached starts no VM at all. A VM of the
 * image gets a copy-on-write child of its last layer as its root layer (disks.ts), so it starts from
 * the same golden snapshot as any VM.
 *
 * The image's ENV, WORKDIR and USER are written into its root (/etc/agentvm/image.json), where the
 * guest agent reads them for runs and shells.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';
import type { Image } from '../image/build.ts';
import { debianPackages, type PackageVersion } from '../image/workstation.ts';
import { QemuDriver, type VmSpec } from '../vmm/qemu.ts';
import { builderDisk, takeLayer } from '../vmm/buildLayers.ts';
import { randomBase62, sha256Hex } from '../domain/ids.ts';
import { PLANS } from '../domain/plans.ts';
import { configAfter, inheritedVars, parseDockerfile, type ImageConfig, type Step } from '../domain/dockerfile.ts';
import { BASE_CONFIG, markBuiltReady, type ImageFeed } from '../domain/images.ts';
import { IMAGE_CONFIG_PATH, type ExecArgs, type ExecResult, type ProcessOpen } from '../wire/protocol.ts';
import type { EgressGateway } from './egress/gateway.ts';
import { BUILD_MARK, BUSYBOX, BUSYBOX_SH, buildPhases, copyStep, lastStepArgv, lastStepInShell, LIST_PACKAGES_ARGV, planSteps, stepEnv, trackStep, workdirArgv, parsePackages, withoutBusybox, type BuildState } from './buildStep.ts';
import { BUILD_SHELL, BuildShell, type StreamedStep } from './buildShell.ts';
import { chainBytes, chainOf, collectLayers } from './layerGc.ts';
import { LocalGuestAccess } from './guestAccess.ts';
import { BuildLog } from './buildLog.ts';
import * as imageStore from '../store/images.ts';

export interface ImageBuilderOptions {
  db: Db;
  clock: Clock;
  /** The host's driver: the builder's machines are made like its VMs, in a directory of their own. */
  driver: QemuDriver;
  gateway: EgressGateway | null;
  hostId: string;
  /** Where built layers are kept. */
  layersDir: string;
  /** Where builder VMs live while they run. */
  buildDir: string;
  feed: ImageFeed;
  log: Logger;
  /** How long a cached step no image uses is kept (layerGc.ts's default unless given). */
  keepUnusedMs?: number;
  image: () => Image | null;
  /** Builder VMs kept ready (standbys of the builders' driver; 0: none). */
  standbyBuilders?: number;
}

/** Network slots of builder VMs: apart from tenant VMs and scrub VMs. */
const BUILD_SLOT_BASE = 0x7e00;
/** The network slots of builders kept ready (standbys of the builders' driver), beside the others'. */
const BUILD_STANDBY_SLOTS = { first: 0x7f00, last: 0x7f0f };
/** A host silent this long has its image builds taken over (queued again or failed) by the others. */
export const LOST_HOST_MS = 10 * 60_000;
/** How long one step may run. */
const STEP_TIMEOUT_MS = 30 * 60_000;
/** What of one step's output the log keeps (the rest is counted). */
const STEP_OUTPUT_BYTES = 256 * 1024;

export class ImageBuilder {
  private readonly builders: QemuDriver;
  /** Programs in the builders on streams of their data ports (a RUN step's output as it comes). */
  private readonly access: LocalGuestAccess;
  private readonly log: BuildLog;
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  /** Set once start() has removed the builder VMs of an earlier process: a build begun before would lose its VM to that sweep. */
  private swept = false;
  private slot = 0;
  private gcTimer: NodeJS.Timeout | null = null;

  constructor(private readonly o: ImageBuilderOptions) {
    // A builder kept ready (a standby with its translated code warm, standby.ts) for a build FROM base.
    this.builders = new QemuDriver({ ...o.driver.opts, vmsDir: o.buildDir, standby: o.standbyBuilders ?? 1, standbyImages: 0, standbySlots: BUILD_STANDBY_SLOTS, busyElsewhere: () => !o.driver.quiet() });
    this.access = new LocalGuestAccess(this.builders);
    this.log = new BuildLog(o.db, o.clock, o.feed, o.log);
  }

  /** Builds interrupted by a crash go back to the queue, and their builder VMs go; then queued builds start. */
  async start(): Promise<void> {
    // Each builder's QEMU runs as a user of its own: these folders are traversable, not listable, by them.
    for (const dir of [this.o.buildDir, this.o.layersDir]) {
      await mkdir(dir, { recursive: true, mode: 0o711 });
      await chmod(dir, 0o711);
    }
    await this.builders.sweepStandbys();
    for (const vmId of await this.builders.listVmDirs()) {
      await this.builders.adopt(vmId).catch(() => null);
      await this.builders.destroy(vmId).catch((err) => this.o.log.warn({ err, vm_id: vmId }, 'removing a builder VM failed'));
    }
    const requeued = await imageStore.requeueInterrupted(this.o.db, this.o.hostId);
    for (const imageId of requeued) await this.say(imageId, 'its host restarted: the build is queued again, to go on from its last cached step');
    if (requeued.length) this.o.log.info({ images: requeued }, 'image builds interrupted by a restart are queued again');
    this.swept = true;
    // Deleted images' layers and old cached steps go at the latest an hour later (and after each build).
    this.gcTimer = setInterval(() => this.kick(), 3600_000);
    this.gcTimer.unref();
    this.kick();
  }

  /** Takes queued builds one at a time until none is left; a kick while that runs, or as it ends, makes it look again. */
  kick(): void {
    if (this.closed || !this.swept || !this.o.image()) return;
    this.keepBuilderReady();
    this.again = true;
    if (this.running) return;
    this.running = (async () => {
      while (this.again && !this.closed) {
        this.again = false;
        for (;;) {
          if (this.closed) return;
          await this.takeOverLost();
          const row = await imageStore.claimQueued(this.o.db, this.o.hostId);
          if (!row) break;
          await this.build(row).catch((err) => this.o.log.error({ err, image_id: row.image_id }, 'image build failed'));
        }
        // Between builds, never beside one: layers nothing needs any more go.
        await this.collect();
      }
    })()
      .catch((err) => this.o.log.error({ err }, 'taking queued image builds failed'))
      .finally(() => {
        this.running = null;
        if (this.again) this.kick();
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.gcTimer) clearInterval(this.gcTimer);
    await this.running;
    await this.builders.dropStandbys();
  }

  /** The builder shape of the current image is the one kept ready (none before the image is there). */
  private keepBuilderReady(): void {
    const image = this.o.image();
    if (!image || this.builders.keptStandbyShape()?.image.id === image.id) return;
    this.builders.keepStandby(this.builderShape(image));
  }

  /** Builder VMs kept ready now. */
  buildersReady = (): number => this.builders.standbyCount();

  private builderShape(image: Image) {
    return { image, vcpus: PLANS.starter.vcpus, memoryMib: PLANS.starter.memory_mib, diskGib: 1, process: { ...BUILD_SHELL, env: {} } };
  }

  /** Builds of a host silent for LOST_HOST_MS go back to the queue (or fail, saying why): none stays `building`. */
  private async takeOverLost(): Promise<void> {
    const taken = await imageStore.takeOverLost(this.o.db, new Date(this.o.clock.now().getTime() - LOST_HOST_MS));
    for (const imageId of taken.requeued) await this.say(imageId, 'its host stopped answering: the build is queued again');
    for (const imageId of taken.failed) await this.say(imageId, 'its host stopped answering: the build failed');
    if (taken.requeued.length + taken.failed.length > 0) this.o.log.warn(taken, 'image builds of a host that stopped answering taken over');
  }

  /** Removes the layers no image, VM or recent build needs (layerGc.ts). */
  private async collect(): Promise<void> {
    try {
      const r = await collectLayers({ db: this.o.db, hostId: this.o.hostId, layersDir: this.o.layersDir, now: this.o.clock.now(), keepUnusedMs: this.o.keepUnusedMs });
      if (r.removed > 0) this.o.log.info({ removed: r.removed, bytes: r.bytes, kept: r.kept }, 'image layers no longer used removed');
    } catch (err) {
      this.o.log.warn({ err }, 'removing unused image layers failed');
    }
  }

  private say = (imageId: string, text: string) => this.log.say(imageId, text);
  private tell = (imageId: string, text: string) => this.log.tell(imageId, text);

  private async build(row: imageStore.ImageRow & { context: Record<string, string> }): Promise<void> {
    const imageId = row.image_id;
    const image = this.o.image()!;
    const t0 = performance.now();
    const state: BuildState = { vmId: null, env: new Map(), workdir: BASE_CONFIG.workdir, user: 'root', startLayer: null, layer: null, synced: false, idsOf: new Map(), disk: builderDisk(), saved: Promise.resolve(), shell: null, keptPid: null };
    const { phases, timed } = buildPhases();
    try {
      const parent = row.parent === 'base' ? null : await imageStore.byId(this.o.db, row.parent);
      if (row.parent !== 'base' && (!parent?.layer_path || !existsSync(parent.layer_path))) {
        throw new Error(`its parent image ${row.parent} is not on this host`);
      }
      const parentConfig: ImageConfig = parent?.config ?? BASE_CONFIG;
      // `$NAME` in the Dockerfile is the parent's ENV first (and Docker's PATH), as in Docker.
      const { steps } = parseDockerfile(row.dockerfile, inheritedVars(parentConfig.env));
      for (const [k, v] of Object.entries(parentConfig.env)) state.env.set(k, v);
      state.workdir = parentConfig.workdir;
      state.user = parentConfig.user || 'root';
      state.startLayer = state.layer = parent?.layer_path ?? null;
      const parentKey = parent ? `image:${parent.image_id}` : `base:${image.id}`;
      const plan = planSteps(steps, parentKey, row.context);
      this.tell(imageId, `building ${row.name} (${imageId}) FROM ${row.parent}: ${steps.length} step${steps.length === 1 ? '' : 's'}`);
      // The longest prefix the cache has: the build goes on from its last layer.
      let resumeAt = 0;
      for (let i = 0; i < plan.length; i++) {
        if (!plan[i].fs) continue;
        const cached = await imageStore.layer(this.o.db, this.o.hostId, plan[i].key);
        if (!cached || !existsSync(cached.path)) break;
        resumeAt = i + 1;
        state.startLayer = state.layer = cached.path;
      }
      // Steps after the last change of files only set the config: nothing of them is built again.
      if (plan.slice(resumeAt).every((p) => !p.fs)) resumeAt = plan.length;
      // The packages the builder starts with, where known (a build from its parent, no step cached).
      const startPackages = () => (resumeAt > 0 ? null : (parent?.packages ?? debianPackages(image.manifest)));
      if (state.layer) await imageStore.touchLayers(this.o.db, this.o.hostId, await chainOf(state.layer), this.o.clock.now());
      const config = configAfter(parentConfig, steps);
      // The image describes itself to the guest agent: a last layer with its config, cached like a step.
      const configKey = sha256Hex(`${plan.at(-1)?.key ?? parentKey}\nCONFIG ${JSON.stringify(config)}`);
      const cachedConfig = await imageStore.layer(this.o.db, this.o.hostId, configKey);
      const hasConfig = cachedConfig !== undefined && existsSync(cachedConfig.path);
      // A last RUN is followed by the config in its shell, and one layer is both's (its step's key names a
      // layer with a config file then, which the config of any image built on it writes over).
      const lastFs = plan.reduce((last, p, i) => (p.fs ? i : last), -1);
      const configAt = !hasConfig && lastFs >= resumeAt && plan[lastFs].step.kind === 'run' ? lastFs : -1;
      let packages: PackageVersion[] | null = null;
      for (const [i, p] of plan.entries()) {
        const head = `step ${i + 1}/${plan.length}: ${p.step.text.slice(0, 200)}`;
        trackStep(state, p.step);
        if (i < resumeAt) {
          this.tell(imageId, `${head} (cached)`);
          continue;
        }
        this.tell(imageId, head);
        if (!p.fs) continue;
        const withConfig = i === configAt;
        await timed('builder_ms', () => this.ensureBuilder(row, state, image));
        await timed('steps_ms', () => this.runStep(imageId, state, p.step, row.context, !withConfig));
        if (withConfig) packages = await timed('config_ms', () => this.configure(state, config, startPackages));
        await timed('capture_ms', () => this.capture(state, withConfig ? [p.key, configKey] : [p.key]));
      }
      if (hasConfig) {
        state.layer = cachedConfig.path;
        await imageStore.touchLayers(this.o.db, this.o.hostId, [cachedConfig.path], this.o.clock.now());
      } else if (configAt < 0) {
        await timed('builder_ms', () => this.ensureBuilder(row, state, image));
        packages = await timed('config_ms', () => this.configure(state, config, startPackages));
        await timed('capture_ms', () => this.capture(state, [configKey]));
      }
      packages ??= state.vmId ? await this.packages(state) : ((await imageStore.packagesOfLayer(this.o.db, state.layer!)) ?? parent?.packages ?? []);
      await state.saved;
      const layerPath = state.layer!;
      const size = await chainBytes(layerPath);
      const secs = ((performance.now() - t0) / 1000).toFixed(1);
      await this.say(imageId, `image ${imageId} ready in ${secs} s: ${(size / 1024 / 1024).toFixed(1)} MiB of layers, ${packages.length} packages`);
      // Kept only within the tenant's disk_gib, its layers' size now known (else the build fails with the reason).
      if (await markBuiltReady(this.o.db, row.tenant_id, imageId, { layerPath, sizeBytes: size, config, packages }, this.o.clock.now(), this.o.hostId)) {
        this.o.log.info({ image_id: imageId, bytes: size, seconds: Number(secs), ...phases }, 'image built');
      } else this.o.log.warn({ image_id: imageId }, 'an image built here was taken over by another host meanwhile (this host was silent too long)');
    } catch (err) {
      const reason = (err as Error).message.slice(0, 500);
      await this.say(imageId, `build failed: ${reason}`).catch(() => undefined);
      await imageStore.markFailed(this.o.db, imageId, reason, this.o.hostId);
    } finally {
      // The steps that went well stay in the cache (a first layer's copy reads the builder's files).
      await state.saved.catch(() => undefined);
      state.shell?.close();
      if (state.vmId) await this.dropBuilder(state.vmId);
      await this.o.feed.publish({ image_id: imageId }).catch(() => undefined);
    }
  }

  private async ensureBuilder(row: imageStore.ImageRow, state: BuildState, image: Image): Promise<void> {
    if (state.vmId) return;
    const vmId = `vm_build${randomBase62(14)}`;
    const spec: VmSpec = {
      vmId,
      ...this.builderShape(image),
      netSlot: BUILD_SLOT_BASE + (this.slot++ % 0xff),
      hostname: 'agentvm-build',
      upperBacking: state.startLayer,
    };
    state.vmId = vmId;
    this.o.gateway?.setPolicy(vmId, row.egress);
    this.tell(row.image_id, `starting a builder VM (egress ${row.egress.mode}${row.egress.mode === 'allowlist' ? `: ${row.egress.allow.join(' ') || 'nothing'}` : ''})`);
    // A build FROM base with nothing cached takes the builder kept ready, where there is one.
    const took = await this.builders.claimStandby(spec);
    state.keptPid = took?.keptPid ?? null;
    if (took) return this.tell(row.image_id, 'it was kept ready: its programs run warm');
    await this.builders.prepareDisks(spec, true);
    await this.builders.start(spec);
  }

  private async dropBuilder(vmId: string): Promise<void> {
    await this.builders.destroy(vmId).catch((err) => this.o.log.warn({ err, vm_id: vmId }, 'removing a builder VM failed'));
    this.o.gateway?.setPolicy(vmId, null);
  }

  /**
   * The image's last script (buildStep.ts LAST_STEP: its config, its packages, its root frozen) in the
   * build's shell where its RUNs ran, else one exec; the builder goes after it. Answers the packages.
   */
  private async configure(state: BuildState, config: ImageConfig, startPackages: () => PackageVersion[] | null): Promise<PackageVersion[] | null> {
    const startKnown = startPackages() !== null;
    let w: Pick<ExecResult, 'exit_code' | 'stdout' | 'stderr'>;
    if (!state.shell?.running) {
      w = await this.exec(state, { argv: lastStepArgv(IMAGE_CONFIG_PATH, config.workdir, startKnown), stdin: `${JSON.stringify(config)}\n`, asRoot: true, max_output_bytes: 4 << 20 }, 'writing the image config');
    } else {
      const out = { O: [] as string[], E: [] as string[] };
      const r = await state.shell.run({ ...lastStepInShell(IMAGE_CONFIG_PATH, config.workdir, startKnown, JSON.stringify(config)), cwd: '/', env: stepEnv(state, 0), ids: { uid: 0, gid: 0 }, timeoutMs: STEP_TIMEOUT_MS, capBytes: 4 << 20 }, async (text, stream) => void out[stream].push(text));
      w = { exit_code: r.exitCode, stdout: out.O.map((l) => `${l}\n`).join(''), stderr: out.E.join('\n') || (r.cut ?? '') };
    }
    if (w.exit_code !== 0 || !w.stdout.startsWith('ok\n')) throw new Error(`writing the image's config failed: ${w.stderr.trim().slice(0, 200)}`);
    state.synced = true;
    return parsePackages(w.stdout.slice(3)) ?? startPackages();
  }

  /** Runs `args` in the builder as `state.user`, in `state.workdir`, with the build's environment. */
  private async exec(state: BuildState, args: Omit<ExecArgs, 'uid' | 'gid' | 'env'> & { asRoot?: boolean }, what: string): Promise<ExecResult> {
    const ids = args.asRoot ? { uid: 0, gid: 0 } : await this.ids(state);
    const run = (argv: string[]) => this.builders.exec(state.vmId!, { max_output_bytes: STEP_OUTPUT_BYTES, timeout_ms: STEP_TIMEOUT_MS, ...args, argv, ...ids, env: stepEnv(state, ids.uid) }, STEP_TIMEOUT_MS + 30_000);
    let r = await run(args.argv);
    const plain = withoutBusybox(args.argv, r);
    if (plain) r = await run(plain);
    if (r.timed_out) throw new Error(`${what} ran longer than ${STEP_TIMEOUT_MS / 60_000} minutes`);
    return r;
  }

  /** The uid and gid of the build's USER (`name`, `name:group` or numbers), looked up in the builder. */
  private async ids(state: BuildState): Promise<{ uid: number; gid: number }> {
    const [user, group] = state.user.split(':');
    if (user === 'root' && !group) return { uid: 0, gid: 0 };
    const known = state.idsOf.get(state.user);
    if (known) return known;
    const r = await this.exec(state, { argv: [...BUSYBOX_SH, 'id -u "$1" && if [ -n "$2" ]; then getent group "$2" | cut -d: -f3 || echo "$2"; else id -g "$1"; fi', 'ids', user, group ?? ''], asRoot: true }, 'USER');
    const [uid, gid] = r.stdout.trim().split('\n').map(Number);
    if (r.exit_code !== 0 || !Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error(`USER ${state.user}: no such user in the image`);
    state.idsOf.set(state.user, { uid, gid });
    return { uid, gid };
  }

  private async runStep(imageId: string, state: BuildState, step: Step, context: Record<string, string>, sync: boolean): Promise<void> {
    if (step.kind === 'workdir') {
      // The folders it makes are the USER's, as BuildKit makes them (root's under USER root).
      const { uid, gid } = await this.ids(state);
      const r = await this.exec(state, { argv: workdirArgv(state.workdir, uid === 0 && gid === 0 ? '' : `${uid}:${gid}`), asRoot: true }, `line ${step.line}`);
      if (r.exit_code !== 0) throw new Error(`line ${step.line}: making ${state.workdir} failed: ${r.stderr.trim().slice(0, 200)}`);
      return;
    }
    if (step.kind === 'run') {
      // In the build's shell (one for all its RUNs), what it prints to the log line by line while it runs.
      const ids = await this.ids(state);
      const run: StreamedStep = { argv: step.argv, cwd: state.workdir || '/', env: stepEnv(state, ids.uid), ids, timeoutMs: STEP_TIMEOUT_MS, capBytes: STEP_OUTPUT_BYTES, sync, mark: BUILD_MARK };
      const open = (process: ProcessOpen) => this.access.openShell(state.vmId!, { cols: 80, rows: 24, env: {}, process });
      state.shell = await BuildShell.alive(state.shell, open, run.env, state.keptPid === null ? undefined : () => this.access.attachProcess(state.vmId!, state.keptPid!));
      const r = await state.shell.run(run, (line) => this.say(imageId, line));
      // Its end flushed the builder's filesystems (a step killed before its end did not: its build fails).
      state.synced = sync && r.exitCode === 0;
      if (r.timedOut) throw new Error(`line ${step.line} ran longer than ${STEP_TIMEOUT_MS / 60_000} minutes`);
      if (r.cut) throw new Error(`line ${step.line}: the builder stopped in the middle of the step (${r.cut})`);
      if (r.droppedBytes > 0) await this.say(imageId, `(${r.droppedBytes} more bytes of output not kept)`);
      if (r.exitCode !== 0) {
        // The reason carries the step, its exit code and the tail of what it printed.
        const tail = r.tail.join('\n').trim().slice(-300);
        throw new Error(`line ${step.line}: ${step.text.slice(0, 120)} exited with ${r.exitCode}${tail ? `; its output ended:\n${tail}` : ''}`);
      }
      return;
    }
    if (step.kind !== 'copy') return;
    const copied = await copyStep((args) => this.exec(state, { ...args, asRoot: true }, `line ${step.line}`), step, state.workdir, context);
    this.tell(imageId, `copied ${copied} file${copied === 1 ? '' : 's'}`);
  }

  /** Flushes the builder's root and keeps what changed since the last layer as the layer of `keys` (buildLayers.ts). */
  private async capture(state: BuildState, keys: string[]): Promise<void> {
    if (!state.synced) await this.exec(state, { argv: [BUSYBOX, 'sync'], asRoot: true }, 'sync');
    state.synced = false;
    await mkdir(this.o.layersDir, { recursive: true });
    const out = path.join(this.o.layersDir, `${keys[0]}.qcow2`);
    const m = this.builders.snapshotMachine(state.vmId!);
    if (!m) throw new Error('the builder VM stopped');
    const { whole } = await takeLayer(m, this.builders.vmDir(state.vmId!), state.disk, out, state.layer);
    // In the cache only once it and every layer under it are whole (a first layer's copy goes on beside the next step).
    state.saved = Promise.all([state.saved, whole]).then(async () => {
      const size = (await stat(out)).size;
      for (const key of keys) await imageStore.saveLayer(this.o.db, this.o.hostId, key, out, size, this.o.clock.now());
    });
    state.saved.catch(() => undefined); // awaited by the build: its failure fails the build there
    state.layer = out;
  }

  private packages = async (state: BuildState) =>
    parsePackages((await this.exec(state, { argv: LIST_PACKAGES_ARGV, asRoot: true, max_output_bytes: 4 << 20 }, 'listing packages')).stdout) ?? [];
}
