/**
 * The QEMU driver: one `-M microvm` process per VM, supervised. Disks, sockets and the pid file of a
 * VM live in its own directory, so a restarted server finds and re-adopts the VMs that still run.
 * It knows nothing of tenants or money.
 *
 * Every VM has the same machine: the image's root as a read-only virtio disk shared by all VMs, and
 * its own two disks on a virtio-scsi controller (the writable layer of its root, its persist disk).
 * That makes one booted guest good for many VMs: a golden VM of a shape (image, vCPUs, memory) is
 * saved once (see snapshot.ts) and a VM starts by resuming it with its own disks plugged in after it
 * resumes. Without a snapshot it boots cold; either way the guest agent's `assume` makes it this VM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { existsSync, openSync, closeSync } from 'node:fs';
import net from 'node:net';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { agentRequest, connectAgent, connectQmp, qmp, type JsonLineChannel } from './channel.ts';
import type { Accel } from './probe.ts';
import { ASSUME_PORT_NAME, PERSIST_MODEL, UPPER_MODEL, assumeLine, factsFromAssumed, parseKeyValues, type AssumeArgs, type ExecArgs, type ExecResult, type HelloFacts } from '../guest/protocol.ts';
import type { Image } from '../image/build.ts';

export interface VmSpec {
  vmId: string;
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  image: Image;
  /** Picks the VM's private network; distinct per VM on a host. */
  netSlot: number;
  hostname: string;
  /** A template's disk image: the persist disk starts as its copy-on-write child. */
  persistBacking?: string | null;
}

export interface ExitInfo {
  expected: boolean;
  reason: string;
}

/** Where a VM starts from: a snapshot's saved machine, or a cold boot. */
export interface SnapshotFiles {
  key: string;
  /** Guest RAM: the golden VM's (shared), each clone's copy-on-write mapping of it (private). */
  mem: string;
  /** Device state, written by the golden VM's migration. */
  state: string;
}

/** Finds snapshots for a VM's shape and learns of ones that fail (implemented by SnapshotStore). */
export interface SnapshotSource {
  find(spec: VmSpec): Promise<SnapshotFiles | null>;
  failed(snap: SnapshotFiles, err: Error): void;
}

export type StartedFrom = 'snapshot' | 'cold';

/** The root layer's size: what a VM can add to its root filesystem. */
export const UPPER_GIB = 8;

export interface DriverOptions {
  vmsDir: string;
  /** Empty ext4 filesystems, one per size, that new disks start as (copy-on-write). */
  blankDir: string;
  qemu: string;
  accel: Accel;
  /** Let guests reach the outside world through user-mode networking (off: `restrict=on`). */
  egress: boolean;
  bootTimeoutMs: number;
  log?: (msg: string, fields?: object) => void;
}

interface Handle {
  vmId: string;
  startedFrom: StartedFrom;
  pid: number;
  qmp: JsonLineChannel;
  agent: JsonLineChannel;
  facts: HelloFacts;
  stopping: boolean;
  exited: Promise<ExitInfo>;
}

/** The guest network of slot n: 10.(128 + n/256).(n%256).0/24, the guest at .15. */
export function netOfSlot(slot: number): { net: string; guest: string; gateway: string; dns: string } {
  if (!Number.isInteger(slot) || slot < 0 || slot > 0x7fff) throw new Error(`network slot ${slot} is out of range`);
  const prefix = `10.${128 + (slot >> 8)}.${slot & 255}`;
  return { net: `${prefix}.0/24`, guest: `${prefix}.15`, gateway: `${prefix}.2`, dns: `${prefix}.3` };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function runQemuImg(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('qemu-img', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`qemu-img ${args[0]}: ${err.trim()}`))));
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let cachedKhz: number | undefined;
async function hostTscKhz(): Promise<number> {
  if (cachedKhz !== undefined) return cachedKhz;
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const mhz = Number(/^cpu MHz\s*:\s*([\d.]+)/m.exec(cpuinfo)?.[1] ?? 0);
  cachedKhz = Math.round(mhz * 1000);
  return cachedKhz;
}

export class QemuDriver extends EventEmitter {
  private readonly handles = new Map<string, Handle>();

  constructor(readonly opts: DriverOptions) {
    super();
  }

  vmDir(vmId: string): string {
    if (!/^[A-Za-z0-9_]+$/.test(vmId)) throw new Error(`bad VM id ${vmId}`);
    return path.join(this.opts.vmsDir, vmId);
  }

  private files(vmId: string): MachineFiles {
    return machineFiles(this.vmDir(vmId));
  }

  /** Set by the host once its snapshot store exists; without it every start is a cold boot. */
  snapshots: SnapshotSource | null = null;

  isRunning(vmId: string): boolean {
    return this.handles.has(vmId);
  }

  facts(vmId: string): HelloFacts | undefined {
    return this.handles.get(vmId)?.facts;
  }

  /** Whether the running VM resumed from a snapshot or booted cold. */
  startedFrom(vmId: string): StartedFrom | undefined {
    return this.handles.get(vmId)?.startedFrom;
  }

  pidOf(vmId: string): number | undefined {
    return this.handles.get(vmId)?.pid;
  }

  /** VM directories on disk (running or not). */
  async listVmDirs(): Promise<string[]> {
    return (await readdir(this.opts.vmsDir).catch(() => [] as string[])).filter((n) => /^vm_[A-Za-z0-9]+$/.test(n));
  }

  /**
   * Makes the VM's disks: the persist disk once (a template's copy-on-write child, else a blank ext4
   * of the plan's size), the root layer when missing or when a fresh root is asked for (restart,
   * reprovision). New disks are qcow2 children of a blank filesystem: nothing to format at boot.
   */
  async prepareDisks(spec: VmSpec, freshRoot: boolean): Promise<void> {
    const f = this.files(spec.vmId);
    await mkdir(f.dir, { recursive: true, mode: 0o700 });
    const make = async (file: string, gib: number, backing?: string | null) => {
      if (backing) await runQemuImg(['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', backing, `${file}.tmp`, `${gib}G`]);
      else await copyFile(await this.blankOverlay(gib), `${file}.tmp`);
      await rename(`${file}.tmp`, file);
    };
    // A whole root of the layout before root layers; its VM starts with a fresh root.
    await rm(path.join(f.dir, 'root.qcow2'), { force: true });
    await Promise.all([
      existsSync(f.persist) ? undefined : make(f.persist, spec.diskGib, spec.persistBacking),
      freshRoot || !existsSync(f.upper) ? make(f.upper, UPPER_GIB) : undefined,
    ]);
  }

  private readonly overlays = new Map<number, Promise<string>>();

  /** An empty qcow2 child of the blank filesystem of `gib` GiB: a new disk is a copy of it (a few KiB). */
  private blankOverlay(gib: number): Promise<string> {
    let p = this.overlays.get(gib);
    if (!p) {
      p = (async () => {
        const blank = await this.blank(gib);
        const file = `${blank}.child.qcow2`;
        if (!existsSync(file)) {
          const tmp = `${file}.${process.pid}.tmp`;
          await runQemuImg(['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', blank, tmp, `${gib}G`]);
          await rename(tmp, file);
        }
        return file;
      })();
      p.catch(() => this.overlays.delete(gib));
      this.overlays.set(gib, p);
    }
    return p;
  }

  private readonly blanks = new Map<number, Promise<string>>();

  /** The blank ext4 filesystem of `gib` GiB (a sparse raw file, made once, never written again). */
  private blank(gib: number): Promise<string> {
    let p = this.blanks.get(gib);
    if (!p) {
      p = (async () => {
        const file = path.join(this.opts.blankDir, `ext4-${gib}G.raw`);
        if (existsSync(file)) return file;
        await mkdir(this.opts.blankDir, { recursive: true });
        const tmp = `${file}.${process.pid}.tmp`;
        await rm(tmp, { force: true });
        await writeFile(tmp, '');
        await truncate(tmp, gib * 1024 ** 3);
        await runTool('mkfs.ext4', ['-q', '-F', '-E', 'lazy_itable_init=1,lazy_journal_init=1,nodiscard', tmp]);
        await rename(tmp, file);
        return file;
      })();
      p.catch(() => this.blanks.delete(gib));
      this.blanks.set(gib, p);
    }
    return p;
  }

  /**
   * The QEMU command line of a machine. `golden` is the machine a snapshot is saved from (RAM in a
   * shared file, no disks of a VM's own); `clone` resumes that machine with RAM mapped copy-on-write
   * and the VM's disks ready to plug in; `cold` boots the same machine with the disks in place.
   */
  async commandLine(spec: VmSpec, how: { mode: 'cold' } | { mode: 'golden' | 'clone'; snap: SnapshotFiles; dir?: string }): Promise<string[]> {
    const f = how.mode === 'golden' ? machineFiles(how.dir!) : this.files(spec.vmId);
    const net = netOfSlot(spec.netSlot);
    const cmdline = ['console=ttyS0', 'quiet', 'panic=-1', 'pci=off', 'reboot=t', ...(this.opts.accel === 'tcg' ? [`tsc_early_khz=${await hostTscKhz()}`] : [])].join(' ');
    const accel = this.opts.accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host,-arch-capabilities'] : ['-accel', 'tcg,tb-size=128', '-cpu', 'max'];
    const memory =
      how.mode === 'cold'
        ? []
        : ['-object', `memory-backend-file,id=mem,size=${spec.memoryMib}M,mem-path=${how.snap.mem},share=${how.mode === 'golden' ? 'on' : 'off'}`];
    const ownDisks = ['-drive', `id=upper,file=${f.upper},format=qcow2,if=none,cache=unsafe,discard=unmap,detect-zeroes=unmap`,
      '-drive', `id=persist,file=${f.persist},format=qcow2,if=none,cache=writeback,discard=unmap,detect-zeroes=unmap`];
    return [
      '-name', spec.vmId,
      '-M', `microvm,isa-serial=on,rtc=on${how.mode === 'cold' ? '' : ',memory-backend=mem'}`,
      ...accel,
      ...memory,
      '-m', String(spec.memoryMib),
      '-smp', String(spec.vcpus),
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
      '-kernel', spec.image.kernel,
      '-initrd', spec.image.initramfs,
      '-append', cmdline,
      '-serial', `file:${f.console}`,
      '-drive', `id=root,file=${spec.image.rootfs},format=raw,if=none,readonly=on,cache=unsafe`,
      '-device', 'virtio-blk-device,drive=root,serial=root',
      '-device', 'virtio-scsi-device,id=scsi0',
      '-netdev', `user,id=net0,net=${net.net},host=${net.gateway},dns=${net.dns},restrict=${this.opts.egress ? 'off' : 'on'}`,
      '-device', 'virtio-net-device,netdev=net0',
      '-device', 'virtio-rng-device',
      '-device', 'virtio-serial-device',
      '-chardev', `socket,id=agent,path=${f.agent},server=on,wait=off`,
      '-device', 'virtserialport,chardev=agent,name=agentvm.0',
      '-chardev', `socket,id=assume,path=${f.assume},server=on,wait=off`,
      '-device', `virtserialport,chardev=assume,name=${ASSUME_PORT_NAME}`,
      '-qmp', `unix:${f.qmp},server=on,wait=off`,
      '-pidfile', f.pid,
      ...(how.mode === 'cold' ? [...ownDisks, ...OWN_DISK_DEVICES.flatMap((d) => ['-device', scsiDevice(d)])] : []),
      ...(how.mode === 'clone' ? [...ownDisks, '-S', '-incoming', 'defer'] : []),
    ];
  }

  /** The last lines the guest printed on its console: what a failed boot reports. */
  async consoleTail(vmId: string, lines = 5): Promise<string> {
    const f = this.files(vmId);
    const text = await readFile(f.console, 'utf8').catch(() => '');
    const log = await readFile(f.log, 'utf8').catch(() => '');
    return `${text}\n${log}`.split('\n').map((l) => l.trim()).filter(Boolean).slice(-lines).join(' | ');
  }

  /**
   * Starts the VM and answers once its guest agent is this VM: from its shape's snapshot when there is
   * one, else (or when resuming fails: logged, never a failed VM) by a cold boot.
   */
  async start(spec: VmSpec): Promise<HelloFacts> {
    if (this.handles.has(spec.vmId)) throw new Error(`${spec.vmId} is already running`);
    const snap = (await this.snapshots?.find(spec)) ?? null;
    if (snap) {
      try {
        return await this.launch(spec, snap);
      } catch (err) {
        this.opts.log?.('resuming from the snapshot failed; booting cold', { vm_id: spec.vmId, snapshot: snap.key, err });
        this.snapshots?.failed(snap, err as Error);
      }
    }
    return this.launch(spec, null);
  }

  private async launch(spec: VmSpec, snap: SnapshotFiles | null): Promise<HelloFacts> {
    const f = this.files(spec.vmId);
    const args = await this.commandLine(spec, snap ? { mode: 'clone', snap } : { mode: 'cold' });
    // A resume is quick or broken; a cold boot under emulation takes seconds.
    const timeoutMs = snap ? Math.min(this.opts.bootTimeoutMs, 30_000) : this.opts.bootTimeoutMs;
    const m = await spawnMachine(this.opts.qemu, f, args, timeoutMs);
    try {
      if (snap) {
        // The incoming state loads while paused (-S); then run, and plug in the VM's own disks.
        await m.qmp('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
        await m.qmp('migrate-incoming', { uri: `exec:cat ${shellSafe(snap.state)}` });
        for (;;) {
          const st = await m.qmp<{ status: string }>('query-status');
          if (st.status === 'paused' || st.status === 'postmigrate') break;
          if (st.status !== 'inmigrate') throw new Error(`the snapshot did not load (status ${st.status})`);
          if (Date.now() > m.deadline) throw new Error('the snapshot did not load in time');
          await sleep(5);
        }
        for (const d of OWN_DISK_DEVICES) await m.qmp('device_add', scsiDeviceArgs(d));
        await m.qmp('cont');
      } else if (!(await this.awaitHello(m.agent, m.deadline, () => m.exited))) {
        throw new Error(m.exited ? 'the guest stopped during boot' : `the guest agent did not answer within ${timeoutMs / 1000} s`);
      }
      // The assume program answers with everything the host needs; the agent, resumed alongside,
      // answers its first request when one comes.
      const out = await m.assume(assumeLine(this.assumeArgs(spec)));
      if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
      const facts = factsFromAssumed(out);
      if (!facts.persist.mounted) this.opts.log?.('the persist disk is not mounted', { vm_id: spec.vmId, err: facts.persist.error });
      this.track(spec.vmId, snap ? 'snapshot' : 'cold', m.pid, m.qmpCh, m.agent, facts, m.exit);
      return facts;
    } catch (err) {
      await m.kill();
      const tail = await this.consoleTail(spec.vmId);
      throw new Error(`${(err as Error).message}${m.exitText() ? ` (qemu ${m.exitText()})` : ''}${tail ? `; console: ${tail}` : ''}`);
    }
  }

  private assumeArgs(spec: VmSpec): AssumeArgs {
    const net = netOfSlot(spec.netSlot);
    return {
      instance_id: randomUUID(),
      hostname: spec.hostname,
      machine_id: createHash('sha256').update(`agentvm machine ${spec.vmId}`).digest('hex').slice(0, 32),
      ipv4: `${net.guest}/24`,
      gateway: net.gateway,
      dns: net.dns,
      time_ms: Date.now(),
      entropy_hex: randomBytes(64).toString('hex'),
      disk_wait_ms: 10_000,
    };
  }

  private async awaitHello(agent: JsonLineChannel, deadline: number, gone: () => boolean): Promise<HelloFacts | null> {
    // Until the guest opens its port nothing answers; ask again every so often.
    while (Date.now() < deadline && !gone() && !agent.isClosed) {
      try {
        return await agentRequest<HelloFacts>(agent, 'hello', undefined, 500);
      } catch {
        // not up yet
      }
    }
    return null;
  }

  private track(vmId: string, startedFrom: StartedFrom, pid: number, qmpCh: JsonLineChannel, agent: JsonLineChannel, facts: HelloFacts, exitReason: Promise<string>): void {
    const handle: Handle = {
      vmId,
      startedFrom,
      pid,
      qmp: qmpCh,
      agent,
      facts,
      stopping: false,
      exited: Promise.race([
        exitReason,
        // An adopted QEMU is not our child: its control socket closing is how its end shows. For our
        // own child, the exit status (a signal, a code) follows a moment later and says more.
        new Promise<void>((resolve) => qmpCh.once('close', resolve)).then(() =>
          Promise.race([exitReason, sleep(1000).then(() => 'exited (its control socket closed)')]),
        ),
      ]).then(async (reason) => {
        // The socket closes a moment before the process is gone; wait for that, briefly.
        for (let i = 0; i < 100 && pidAlive(pid); i++) await sleep(20);
        return { expected: handle.stopping, reason };
      }),
    };
    this.handles.set(vmId, handle);
    void handle.exited.then((info) => {
      qmpCh.close();
      agent.close();
      if (this.handles.get(vmId) === handle) this.handles.delete(vmId);
      this.emit('exit', vmId, info);
    });
  }

  /**
   * Finds a QEMU left running by an earlier server process and takes it over: the pid file names it,
   * and its command line must name this VM's directory (a recycled pid is never touched).
   */
  async adopt(vmId: string): Promise<HelloFacts | null> {
    if (this.handles.has(vmId)) return this.handles.get(vmId)!.facts;
    const f = this.files(vmId);
    const pid = await this.ownPid(vmId);
    if (!pid) return null;
    try {
      const qmpCh = await connectQmp(f.qmp);
      const agent = await connectAgent(f.agent);
      const facts = await agentRequest<HelloFacts>(agent, 'hello', undefined, 5000);
      // Stopped between resuming and taking its identity: not a VM yet; it boots again.
      if (!facts.assumed) throw new Error('the guest had not taken its identity');
      this.track(vmId, 'cold', pid, qmpCh, agent, facts, new Promise<string>(() => undefined));
      return facts;
    } catch (err) {
      this.opts.log?.('could not adopt a running VM; stopping it', { vm_id: vmId, err });
      await this.killPid(vmId, pid);
      return null;
    }
  }

  /** The pid in the VM's pid file, if that process is alive and is this VM's QEMU. */
  async ownPid(vmId: string): Promise<number | null> {
    const f = this.files(vmId);
    const pid = Number((await readFile(f.pid, 'utf8').catch(() => '')).trim());
    if (!pid || !pidAlive(pid)) return null;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    return cmdline.includes(f.dir + path.sep) ? pid : null;
  }

  private async killPid(vmId: string, pid: number): Promise<void> {
    if ((await this.ownPid(vmId)) !== pid) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    for (let i = 0; i < 250 && pidAlive(pid); i++) await sleep(20);
  }

  /** One request to the VM's guest agent. */
  async request<T>(vmId: string, op: string, args: unknown, timeoutMs: number): Promise<T> {
    const h = this.handles.get(vmId);
    if (!h) throw new Error(`${vmId} is not running`);
    return agentRequest<T>(h.agent, op, args, timeoutMs);
  }

  exec(vmId: string, args: ExecArgs, timeoutMs: number): Promise<ExecResult> {
    return this.request<ExecResult>(vmId, 'exec', args, timeoutMs);
  }

  async ping(vmId: string): Promise<number> {
    const t = process.hrtime.bigint();
    await this.request(vmId, 'ping', undefined, 5000);
    return Number(process.hrtime.bigint() - t) / 1e6;
  }

  /** Stops the VM: flush the guest's disks through its agent, then quit QEMU; kill it if that hangs. */
  async stop(vmId: string, opts: { graceful: boolean } = { graceful: true }): Promise<void> {
    const h = this.handles.get(vmId);
    if (!h) {
      const pid = await this.ownPid(vmId);
      if (pid) await this.killPid(vmId, pid);
      return;
    }
    h.stopping = true;
    if (opts.graceful) {
      await agentRequest(h.agent, 'sync', undefined, 10_000).catch(() => undefined);
      await qmp(h.qmp, 'quit', undefined, 2000).catch(() => undefined);
      const quit = await Promise.race([h.exited.then(() => true), sleep(5000).then(() => false)]);
      if (quit) return;
    }
    await this.killPid(vmId, h.pid);
    await h.exited;
  }

  /** Stops the VM and removes its directory with every disk. */
  async destroy(vmId: string): Promise<void> {
    await this.stop(vmId, { graceful: false });
    await rm(this.vmDir(vmId), { recursive: true, force: true });
  }

  /** Where the VM's persist disk is (a capture copies it). */
  persistPath(vmId: string): string {
    return this.files(vmId).persist;
  }

  /** Bytes the VM's disks take on the host. */
  async diskUsage(vmId: string): Promise<number> {
    const f = this.files(vmId);
    let total = 0;
    for (const p of [f.upper, f.persist]) total += await stat(p).then((s) => s.blocks * 512).catch(() => 0);
    return total;
  }

  /** Stops every VM this driver tracks (tests and benchmarks; a normal shutdown leaves VMs running). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.handles.keys()].map((id) => this.stop(id, { graceful: false })));
  }

  /** Lets go of every VM without stopping it (server shutdown: the next server re-adopts them). */
  release(): void {
    for (const h of this.handles.values()) {
      h.stopping = true;
      h.qmp.removeAllListeners('close');
      h.qmp.close();
      h.agent.close();
    }
    this.handles.clear();
  }
}

function describeExit(e: { code: number | null; signal: NodeJS.Signals | null }): string {
  if (e.signal) return `killed by ${e.signal}`;
  return e.code === null ? 'exited' : `exit code ${e.code}`;
}

export interface MachineFiles {
  dir: string;
  upper: string;
  persist: string;
  qmp: string;
  agent: string;
  assume: string;
  pid: string;
  console: string;
  log: string;
}

export function machineFiles(dir: string): MachineFiles {
  return {
    dir,
    upper: path.join(dir, 'upper.qcow2'),
    persist: path.join(dir, 'persist.qcow2'),
    qmp: path.join(dir, 'qmp.sock'),
    agent: path.join(dir, 'agent.sock'),
    assume: path.join(dir, 'assume.sock'),
    pid: path.join(dir, 'qemu.pid'),
    console: path.join(dir, 'console.log'),
    log: path.join(dir, 'qemu.log'),
  };
}

/** A VM's own disks on the SCSI controller, found in the guest by model. */
const OWN_DISK_DEVICES = [
  { id: 'upper', drive: 'upper', product: UPPER_MODEL, scsiId: 1 },
  { id: 'persist', drive: 'persist', product: PERSIST_MODEL, scsiId: 2 },
];
type OwnDisk = (typeof OWN_DISK_DEVICES)[number];

function scsiDevice(d: OwnDisk): string {
  return `scsi-hd,id=${d.id},drive=${d.drive},bus=scsi0.0,scsi-id=${d.scsiId},lun=0,product=${d.product}`;
}

function scsiDeviceArgs(d: OwnDisk): object {
  return { driver: 'scsi-hd', id: d.id, drive: d.drive, bus: 'scsi0.0', 'scsi-id': d.scsiId, lun: 0, product: d.product };
}

function shellSafe(p: string): string {
  if (!/^[A-Za-z0-9_./-]+$/.test(p)) throw new Error(`the path ${p} holds characters a snapshot cannot be loaded from`);
  return p;
}

function runTool(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd}: ${err.trim()}`))));
  });
}

/** A QEMU process being brought up: its control and agent channels, its end, and a way to end it. */
export interface Machine {
  pid: number;
  qmpCh: JsonLineChannel;
  agent: JsonLineChannel;
  deadline: number;
  readonly exited: boolean;
  exit: Promise<string>;
  exitText(): string;
  qmp<T = unknown>(command: string, args?: object): Promise<T>;
  /** Writes the assume line to its port and answers the program's key=value lines (once: then the port is closed). */
  assume(line: string): Promise<Record<string, string>>;
  kill(): Promise<void>;
}

const SETPRIV = '/usr/bin/setpriv';
const NICE = '/usr/bin/nice';
/**
 * Guests run below the control plane: a host whose VMs are busy (boots under TCG take a whole core
 * each) still answers its API, restarts in seconds and meters on time. `nice` execs QEMU, so every
 * thread QEMU makes later (its vCPUs) inherits the priority. With the kernel's autogroup scheduling,
 * a detached QEMU (a session of its own) is a group of its own that competes as an equal whatever
 * its threads' niceness: the group is niced too.
 */
const VM_NICENESS = '19';

async function niceAutogroup(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/autogroup`, VM_NICENESS).catch(() => undefined); // no autogroup here: nothing to do
}

/**
 * Spawns QEMU detached and connects to its QMP, agent and assume sockets. A VM's QEMU outlives this
 * process (the next server re-adopts it); with `dieWithServer` (a golden VM being saved) it is killed
 * when this process ends, however it ends (util-linux's setpriv --pdeathsig).
 */
export async function spawnMachine(qemu: string, f: MachineFiles, args: string[], timeoutMs: number, opts: { dieWithServer?: boolean } = {}): Promise<Machine> {
  for (const p of [f.qmp, f.agent, f.assume, f.pid, f.console]) await rm(p, { force: true });
  const logFd = openSync(f.log, 'a');
  const niced = existsSync(NICE) ? [NICE, '-n', VM_NICENESS, qemu, ...args] : [qemu, ...args];
  const [cmd, ...argv] = opts.dieWithServer && existsSync(SETPRIV) ? [SETPRIV, '--pdeathsig', 'KILL', '--', ...niced] : niced;
  const child: ChildProcess = spawn(cmd, argv, { detached: true, stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  if (child.pid) await niceAutogroup(child.pid);
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const childExit = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => ((exitInfo = { code, signal }), resolve()));
    child.once('error', () => ((exitInfo = { code: null, signal: null }), resolve()));
  });
  const deadline = Date.now() + timeoutMs;
  const kill = async () => {
    if (!exitInfo && child.pid) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // gone already
      }
      await childExit;
    }
  };
  let qmpCh: JsonLineChannel | undefined;
  let agent: JsonLineChannel | undefined;
  let assumeSock: net.Socket | undefined;
  let assumeOut = '';
  try {
    while (!qmpCh) {
      if (exitInfo) throw new Error(`qemu exited during start (${describeExit(exitInfo)}): ${(await readFile(f.log, 'utf8').catch(() => '')).trim().split('\n').slice(-2).join(' ')}`);
      if (Date.now() > deadline) throw new Error('qemu did not open its control socket in time');
      if (existsSync(f.qmp)) qmpCh = await connectQmp(f.qmp).catch(() => undefined);
      if (!qmpCh) await sleep(5);
    }
    agent = await connectAgent(f.agent);
    assumeSock = await new Promise<net.Socket>((resolve, reject) => {
      const sock = net.connect(f.assume, () => resolve(sock));
      sock.once('error', reject);
    });
    assumeSock.on('data', (c: Buffer) => (assumeOut += c.toString()));
    assumeSock.on('error', () => undefined);
  } catch (err) {
    qmpCh?.close();
    agent?.close();
    await kill();
    throw err;
  }
  const q = qmpCh;
  const a = agent;
  const as = assumeSock;
  return {
    pid: child.pid!,
    qmpCh: q,
    agent: a,
    deadline,
    get exited() {
      return exitInfo !== undefined;
    },
    exit: childExit.then(() => describeExit(exitInfo!)),
    exitText: () => (exitInfo ? describeExit(exitInfo) : ''),
    qmp: <T,>(command: string, args?: object) => qmp<T>(q, command, args, Math.max(1000, deadline - Date.now())),
    assume: (line: string) =>
      new Promise<Record<string, string>>((resolve, reject) => {
        const check = () => {
          if (!/(^|\n)end\n/.test(assumeOut)) return false;
          as.off('data', check);
          clearTimeout(timer);
          as.end();
          resolve(parseKeyValues(assumeOut));
          return true;
        };
        const timer = setTimeout(() => {
          as.off('data', check);
          reject(new Error(exitInfo ? `qemu ${describeExit(exitInfo)}` : 'the guest did not take its identity in time'));
        }, Math.max(1000, deadline - Date.now()));
        as.on('data', check);
        as.write(line);
        check();
      }),
    kill: async () => {
      q.close();
      a.close();
      as.destroy();
      await kill();
    },
  };
}
