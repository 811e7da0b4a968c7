/**
 * The QEMU driver: one `-M microvm` process per VM, supervised. Disks, sockets and the pid file of a
 * VM live in its own directory, so a restarted server finds and re-adopts the VMs that still run.
 * It knows nothing of tenants or money.
 *
 * A VM starts by resuming the golden VM of its shape (see snapshot.ts) with its own disks plugged in
 * after it resumes, or without a snapshot by a cold boot; either way the guest agent's `assume` makes
 * it this VM. A new VM of the standby shape takes a standby instead (standby.ts). The machine's
 * command line is commandLine.ts, its disks disks.ts, its process and sockets machine.ts, a suspend
 * suspend.ts; this file orchestrates them and keeps the VMs that run.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { lstat, readdir, readFile, readlink, rm, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentRequest, MAX_LINE, qmp, type JsonLineChannel, type LineOverflow } from './channel.ts';
import type { DataChannel } from './dataChannel.ts';
import { linkEgress, type GatewayPort } from './egress.ts';
import { giveDir, GOLDEN_SLOT, isolating, runAsOf, sealedCopy, sealedSource, type RunAs } from './isolation.ts';
import { netOfSlot, ownDiskHotplugArgs, qemuCommandLine, slotOfGuest, STANDBY_SLOTS, type MachineStart } from './commandLine.ts';
import { DiskMaker } from './disks.ts';
import { STANDBY_DIR, standbyKey, StandbyPool, type StandbyShape } from './standby.ts';
import { connectMachine, consoleTail, killMachine, machineEnded, machineFiles, machinePid, resumeIncoming, spawnMachine, type Machine, type MachineFiles } from './machine.ts';
import { hostTscKhz, type Accel } from './probe.ts';
import { checkPageFile, DamagedState, discard, hasRecord, load, loadPages, readRecord, save, savePages, suspendFiles, type SuspendRecord } from './suspend.ts';
import { ASSUME_PORT_CLOCK, assumeLine, factsFromAssumed, type AssumeArgs, type ExecArgs, type ExecResult, type HelloFacts } from '../wire/protocol.ts';
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
  /** An image's root layer: the root's writable layer starts as its copy-on-write child (and again at each fresh root). */
  upperBacking?: string | null;
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

/** The golden state saved beside a snapshot's memory file (a suspend of a VM mapping that memory takes its header and RAM section). */
export function stateBesideMem(mem: string): string {
  return path.join(path.dirname(mem), 'state');
}

/** Finds snapshots for a VM's shape and learns of ones that fail (implemented by SnapshotStore). */
export interface SnapshotSource {
  find(spec: VmSpec): Promise<SnapshotFiles | null>;
  /** Whether a start of this shape would find its snapshot now (nothing is built for asking). */
  has(spec: VmSpec): Promise<boolean>;
  failed(snap: SnapshotFiles, err: Error): void;
}

/**
 * How the running VM came up: resumed from its shape's golden snapshot, booted cold, resumed from its
 * own suspend, or a standby it took over (a clone made ahead of need).
 */
export type StartedFrom = 'snapshot' | 'cold' | 'suspended' | 'standby';

/** The RAM block of the machine's memory backend (id `mem`), as QEMU's migration stream names it. */
const RAM_BLOCK = 'mem';

export type { GatewayPort } from './egress.ts';

/** What every machine of a host is made with: its QEMU, accelerator, gateway and boot patience. */
export interface MachineOptions {
  qemu: string;
  accel: Accel;
  /** The host's egress gateway, a guest's only way off its VM; null: guests reach nothing (scrubbing VMs). */
  gateway: { port: GatewayPort } | null;
  bootTimeoutMs: number;
}

export interface DriverOptions extends MachineOptions {
  vmsDir: string;
  /** Empty ext4 filesystems, one per size, that new disks start as (copy-on-write). */
  blankDir: string;
  /** Where starts find snapshots of their shape (SnapshotStore); null: every start is a cold boot. */
  snapshots: SnapshotSource | null;
  log?: (msg: string, fields?: object) => void;
  /** How many standby VMs to keep of the shape keepStandby names (0: none). */
  standby?: number;
  /** The share of the host's cores that must be idle before a standby is made (standby.ts; default 0.5). */
  standbyIdleShare?: number;
  /** Network slots in the standby range held by VMs that were standbys (so not free for a new one). */
  standbySlotsHeld?: () => Promise<Set<number>>;
}

/**
 * The QEMU command line of a machine (see commandLine.ts) in `files`: a VM's, or a golden machine's
 * (snapshot.ts builds those with the same options, before any driver exists).
 */
export async function machineCommandLine(
  o: MachineOptions,
  spec: VmSpec,
  files: MachineFiles,
  how: { mode: 'cold' } | { mode: 'golden' | 'clone'; snap: SnapshotFiles } | { mode: 'resume'; namedRam: boolean; ramBase?: string },
): Promise<string[]> {
  // A QEMU of its own user maps a sealed copy of a memory file it did not make (isolation.ts), passed as descriptor 3.
  const copied = isolating() ? SEALED_MEM : undefined;
  const start: MachineStart =
    how.mode === 'cold' ? how
    : how.mode === 'resume' ? { ...how, ramBase: how.ramBase && (copied ?? how.ramBase) }
    : { mode: how.mode, mem: how.mode === 'clone' ? (copied ?? how.snap.mem) : how.snap.mem };
  return qemuCommandLine({
    spec,
    start,
    files,
    accel: o.accel,
    tscKhz: o.accel === 'tcg' ? await hostTscKhz() : 0,
  });
}

/** Where a QEMU of its own user finds the sealed copy of the memory file it maps (descriptor 3). */
const SEALED_MEM = '/proc/self/fd/3';

/**
 * How a machine's QEMU is started: as its own user (its network slot's; a golden machine's is
 * GOLDEN_SLOT's), with the sealed copy of the memory file it maps. Null user: as this process.
 */
export async function machineSpawn(
  spec: VmSpec,
  how: { mode: 'cold' } | { mode: 'golden' | 'clone'; snap: SnapshotFiles } | { mode: 'resume'; ramBase?: string },
): Promise<{ runAs: RunAs | null; fds: number[] }> {
  const runAs = runAsOf(how.mode === 'golden' ? GOLDEN_SLOT : spec.netSlot);
  if (!runAs) return { runAs, fds: [] };
  const mem = how.mode === 'clone' ? how.snap.mem : how.mode === 'resume' ? how.ramBase : undefined;
  return { runAs, fds: mem ? [await sealedCopy(mem)] : [] };
}

interface Handle {
  vmId: string;
  startedFrom: StartedFrom;
  pid: number;
  qmp: JsonLineChannel;
  agent: JsonLineChannel;
  /** Byte streams to the guest agent: shells, files. */
  data: DataChannel;
  /** Kept connected for the machine's life (Machine.assumePort). */
  assumePort: { destroy(): void } | null;
  facts: HelloFacts;
  stopping: boolean;
  exited: Promise<ExitInfo>;
  /**
   * The data port is in step with the guest (its sync marker seen): streams may be opened. Started by
   * the VM's first shell or file (dataReady), not by its start: under emulation a guest's first use of
   * a code path costs it a translation, and a start's CPU is what many starts at once share.
   */
  dataSynced: Promise<void> | null;
}

/** The assume program's own steps (assume.pl answers `steps_ms=name:ms,...`), as phases `assume_<name>_ms`. */
function assumeSteps(out: Record<string, string>): Record<string, number> {
  const steps: Record<string, number> = {};
  for (const [name, ms] of (out.steps_ms ?? '').split(',').map((p) => p.split(':'))) if (name && Number.isFinite(Number(ms))) steps[`assume_${name}_ms`] = Number(ms);
  return steps;
}

/** A host's first word on a VM's data port: the guest marks where this connection's bytes begin (dataChannel.ts). */
async function syncData(agent: JsonLineChannel, data: DataChannel, timeoutMs: number): Promise<void> {
  await agentRequest(agent, 'data_sync', { token: data.startSync() }, timeoutMs);
}

/** How long after the last start, suspend or resume the host counts as quiet again (standbys are made only then). */
const QUIET_AFTER_START_MS = 3000;

export class QemuDriver extends EventEmitter {
  private readonly handles = new Map<string, Handle>();
  private readonly disks: DiskMaker;
  /** How long each part of a VM's last start took (the reconciler logs them). */
  readonly phases = new Map<string, Record<string, number>>();
  /** VMs whose saved memory is being loaded: their guest's state is neither saved nor running. */
  private readonly resuming = new Set<string>();
  /** Standby VMs of the shape keepStandby names (standby.ts). */
  private readonly standby: StandbyPool;
  /** Starts under way, and when the last one ended: standbys are made when the host is quiet. */
  private starting = 0;
  private lastStartEnded = 0;

  constructor(readonly opts: DriverOptions) {
    super();
    this.disks = new DiskMaker(opts.blankDir);
    this.standby = new StandbyPool({
      vmsDir: opts.vmsDir,
      hasSnapshot: async (shape) => (await opts.snapshots?.has({ vmId: 'standby', ...shape, netSlot: STANDBY_SLOTS.first, hostname: 'standby' })) ?? false,
      launch: (id, shape, netSlot) => this.launchStandby(id, shape, netSlot),
      idleShare: opts.standbyIdleShare,
      slotsInUse: async () => {
        const held = (await opts.standbySlotsHeld?.()) ?? new Set<number>();
        // A running VM that took a standby holds its slot (its row may not name it yet).
        for (const h of this.handles.values()) {
          const slot = slotOfGuest(h.facts.ipv4);
          if (slot !== undefined) held.add(slot);
        }
        return held;
      },
      // A new VM's first work (a shell, a run) comes right after its start: a standby made then would
      // take CPU from it.
      quiet: () => this.starting === 0 && performance.now() - this.lastStartEnded >= QUIET_AFTER_START_MS,
      log: opts.log,
    });
  }

  /**
   * Runs a start (or a suspend, or a resume) as host work that standbys give way to: none is made
   * while one is under way or for QUIET_AFTER_START_MS after, and a standby's warm-up pauses.
   */
  private async busy<T>(work: () => Promise<T>): Promise<T> {
    this.starting++;
    this.standby.busy();
    try {
      return await work();
    } finally {
      this.starting--;
      this.lastStartEnded = performance.now();
    }
  }

  vmDir(vmId: string): string {
    if (!/^[A-Za-z0-9_]+$/.test(vmId)) throw new Error(`bad VM id ${vmId}`);
    return path.join(this.opts.vmsDir, vmId);
  }

  private files(vmId: string): MachineFiles {
    return machineFiles(this.vmDir(vmId));
  }


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

  /**
   * Under TCG, what the running VM's QEMU has translated so far, by its own count (HMP `info jit`):
   * blocks of guest code and bytes of host code. Null under KVM (nothing is translated) or for a VM
   * not running here.
   */
  async translated(vmId: string): Promise<{ blocks: number; codeBytes: number } | null> {
    const h = this.handles.get(vmId);
    if (!h || this.opts.accel !== 'tcg') return null;
    const text = await qmp<string>(h.qmp, 'human-monitor-command', { 'command-line': 'info jit' }, 5000);
    const blocks = /^TB count\s+(\d+)/m.exec(text);
    const code = /^gen code size\s+(\d+)/m.exec(text);
    return blocks && code ? { blocks: Number(blocks[1]), codeBytes: Number(code[1]) } : null;
  }

  /** VM directories on disk (running or not). */
  async listVmDirs(): Promise<string[]> {
    return (await readdir(this.opts.vmsDir).catch(() => [] as string[])).filter((n) => /^vm_[A-Za-z0-9]+$/.test(n));
  }

  /** Makes the VM's disks: the persist disk once, the root layer when missing or when `freshRoot` (see disks.ts). */
  async prepareDisks(spec: VmSpec, freshRoot: boolean): Promise<void> {
    await this.disks.prepare(this.files(spec.vmId), spec, freshRoot);
  }

  /** The QEMU command line of a VM's machine. */
  commandLine(spec: VmSpec, how: { mode: 'cold' } | { mode: 'clone'; snap: SnapshotFiles } | { mode: 'resume'; namedRam: boolean; ramBase?: string }): Promise<string[]> {
    return machineCommandLine(this.opts, spec, this.files(spec.vmId), how);
  }

  /** The last lines the guest printed on its console: what a failed boot reports. */
  consoleTail(vmId: string, lines = 5): Promise<string> {
    return consoleTail(this.files(vmId), lines);
  }

  /** Whether a start of this VM would resume its shape's snapshot (a fraction of a cold boot's work). */
  async willResume(spec: VmSpec): Promise<boolean> {
    return (await this.opts.snapshots?.has(spec)) ?? false;
  }

  /**
   * Starts the VM and answers once its guest agent is this VM: from its shape's snapshot when there is
   * one, else (or when resuming fails: logged, never a failed VM) by a cold boot.
   */
  async start(spec: VmSpec): Promise<HelloFacts> {
    if (this.handles.has(spec.vmId)) throw new Error(`${spec.vmId} is already running`);
    return this.busy(async () => {
      const snap = (await this.opts.snapshots?.find(spec)) ?? null;
      if (snap) {
        try {
          return await this.launch(spec, snap);
        } catch (err) {
          this.opts.log?.('resuming from the snapshot failed; booting cold', { vm_id: spec.vmId, snapshot: snap.key, err });
          this.opts.snapshots?.failed(snap, err as Error);
        }
      }
      return await this.launch(spec, null);
    });
  }

  /**
   * Keeps `count` standby VMs (the driver's `standby` option unless given) of this shape (null: none):
   * a new VM of the shape then starts by taking one (claimStandby). See standby.ts.
   */
  keepStandby(shape: StandbyShape | null, count = this.opts.standby ?? 0): void {
    this.standby.keep(shape, count);
  }

  /** The shape standby VMs are kept of (null: none). */
  keptStandbyShape(): StandbyShape | null {
    return this.standby.keptShape;
  }

  /** How many standby VMs are ready now. */
  standbyCount(): number {
    return this.standby.count;
  }

  /** Ends the standby VMs and makes no more (the server is stopping). */
  dropStandbys(): Promise<void> {
    return this.standby.close();
  }

  /** Removes the standbys an earlier server left (their QEMU with them); a VM's link keeps its own. */
  sweepStandbys(): Promise<void> {
    return this.standby.sweep();
  }

  /** A standby's machine: a clone of the shape's golden VM with fresh disks and a provisional identity. */
  private async launchStandby(id: string, shape: StandbyShape, netSlot: number): Promise<{ m: Machine; phases: Record<string, number> }> {
    const spec: VmSpec = { vmId: id, ...shape, netSlot, hostname: 'standby', persistBacking: null };
    const snap = await this.opts.snapshots?.find(spec);
    if (!snap) throw new Error('its shape has no snapshot');
    await this.prepareDisks(spec, true);
    const t0 = performance.now();
    const who = await machineSpawn(spec, { mode: 'clone', snap });
    await giveDir(this.vmDir(id), who.runAs);
    const m = await spawnMachine(this.opts.qemu, this.files(id), await this.commandLine(spec, { mode: 'clone', snap }), 30_000, who);
    try {
      const phases: Record<string, number> = { spawn_ms: performance.now() - t0 };
      await resumeIncoming(m, this.files(id), snap.state, ownDiskHotplugArgs(), phases);
      const t = performance.now();
      const out = await m.assume(assumeLine({ ...this.assumeArgs(spec), standby: true }));
      if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
      phases.assume_ms = performance.now() - t;
      return { m, phases };
    } catch (err) {
      await m.kill();
      throw err;
    }
  }

  /**
   * Starts a new VM by taking a standby of its shape, when there is one and the VM has never run (no
   * directory) nor starts from a template. Answers null otherwise, or when the standby fails (it is
   * dropped): the VM then starts as usual. The VM's directory becomes a link to the standby's, and the
   * VM takes the standby's network slot (`netSlot`: the caller records it).
   */
  claimStandby(spec: VmSpec): Promise<{ facts: HelloFacts; netSlot: number } | null> {
    return this.busy(() => this.claim(spec));
  }

  private async claim(spec: VmSpec): Promise<{ facts: HelloFacts; netSlot: number } | null> {
    if (spec.persistBacking || spec.upperBacking || this.handles.has(spec.vmId)) return null;
    const key = standbyKey(spec);
    if (!this.standby.has(key)) return null;
    const dir = this.vmDir(spec.vmId);
    if (await lstat(dir).then(() => true, () => false)) return null;
    const s = this.standby.take(key);
    if (!s) return null;
    const t0 = performance.now();
    try {
      const out = await s.m.assume(assumeLine(this.assumeArgs({ ...spec, netSlot: s.netSlot })), { timeoutMs: 30_000 });
      if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
      const phases: Record<string, number> = { standby_assume_ms: performance.now() - t0 };
      Object.assign(phases, assumeSteps(out));
      // From here the standby is this VM: its directory is the VM's (a restarted server adopts it by this name).
      await symlink(s.id, dir);
      const f = this.files(spec.vmId);
      const facts = factsFromAssumed(out);
      this.phases.set(spec.vmId, Object.fromEntries(Object.entries({ ...s.phases, ...phases }).map(([k, v]) => [k, Math.round(v)])));
      this.track(spec.vmId, 'standby', s.m.pid, s.m.qmpCh, s.m.agent, s.m.data, s.m.assumePort, facts, s.m.exit);
      return { facts, netSlot: s.netSlot };
    } catch (err) {
      this.opts.log?.('taking a standby VM failed; starting as usual', { vm_id: spec.vmId, standby: s.id, err: (err as Error).message });
      await rm(dir, { force: true });
      await s.m.kill();
      await rm(this.vmDir(s.id), { recursive: true, force: true });
      return null;
    } finally {
      this.lastStartEnded = performance.now();
      this.standby.fill();
    }
  }

  private async launch(spec: VmSpec, snap: SnapshotFiles | null): Promise<HelloFacts> {
    const f = this.files(spec.vmId);
    const args = await this.commandLine(spec, snap ? { mode: 'clone', snap } : { mode: 'cold' });
    // A resume is quick or broken; a cold boot under emulation takes seconds.
    const timeoutMs = snap ? Math.min(this.opts.bootTimeoutMs, 30_000) : this.opts.bootTimeoutMs;
    const t0 = performance.now();
    const who = await machineSpawn(spec, snap ? { mode: 'clone', snap } : { mode: 'cold' });
    await giveDir(f.dir, who.runAs);
    const m = await spawnMachine(this.opts.qemu, f, args, timeoutMs, who);
    const phases: Record<string, number> = { spawn_ms: performance.now() - t0 };
    try {
      if (snap) {
        // The incoming state loads while paused (-S); then run, with the VM's own disks plugged in.
        await resumeIncoming(m, f, snap.state, ownDiskHotplugArgs(), phases);
      } else if (!(await this.awaitHello(m.agent, m.deadline, () => m.exited))) {
        throw new Error(m.exited ? 'the guest stopped during boot' : `the guest agent did not answer within ${timeoutMs / 1000} s`);
      }
      // The assume program answers with everything the host needs; the agent, resumed alongside,
      // answers its first request when one comes.
      let t = performance.now();
      const out = await m.assume(assumeLine(this.assumeArgs(spec)));
      phases.assume_ms = performance.now() - t;
      // The assume program's own steps (assume.pl: `name:ms,...`).
      Object.assign(phases, assumeSteps(out));
      if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
      this.phases.set(spec.vmId, Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, Math.round(v)])));
      const facts = factsFromAssumed(out);
      if (!facts.persist.mounted) this.opts.log?.('the persist disk is not mounted', { vm_id: spec.vmId, err: facts.persist.error });
      this.track(spec.vmId, snap ? 'snapshot' : 'cold', m.pid, m.qmpCh, m.agent, m.data, m.assumePort, facts, m.exit);
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
      // Alone on its link: its one route is to the egress gateway (assume.pl).
      ipv4: `${net.guest}/32`,
      // No resolver answers: a lookup fails at once; names off the VM resolve at the gateway.
      dns: '127.0.0.1',
      egress: net.egress,
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

  private track(
    vmId: string,
    startedFrom: StartedFrom,
    pid: number,
    qmpCh: JsonLineChannel,
    agent: JsonLineChannel,
    data: DataChannel,
    /** Kept connected for the machine's life (Machine.assumePort). */
    assumePort: { destroy(): void } | null,
    facts: HelloFacts,
    exitReason: Promise<string>,
  ): void {
    const handle: Handle = {
      vmId,
      startedFrom,
      pid,
      qmp: qmpCh,
      agent,
      data,
      assumePort,
      facts,
      stopping: false,
      exited: machineEnded(pid, qmpCh, exitReason).then((reason) => ({ expected: handle.stopping, reason })),
      dataSynced: null,
    };
    this.handles.set(vmId, handle);
    // The guest's connections to its egress gateway (egress.ts), carried on its data port; and the
    // host's socket to it as this VM.
    void this.opts.gateway?.port.attach?.(vmId, this.files(vmId).egress).catch((err: Error) => this.opts.log?.('the gateway socket could not be made', { vm_id: vmId, err: err.message }));
    const egress = linkEgress(
      { vmId, agent, data, dataReady: () => this.dataReady(vmId), stopping: () => handle.stopping || this.handles.get(vmId) !== handle },
      this.opts.gateway?.port ?? null,
    );
    // The guest's notifications (lines with `event`): a run's output and end, for the host's recorder.
    agent.on('message', (msg: Record<string, unknown>) => {
      if (typeof msg.event !== 'string' || egress(msg)) return;
      this.emit('agent-event', vmId, msg);
    });
    // What a guest sends past the caps is dropped, not held (channel.ts, dataChannel.ts): said in the log.
    agent.on('overflow', (o: LineOverflow) => this.opts.log?.('the guest sent a line over the cap; it was dropped', { vm_id: vmId, chars: o.chars, request_id: o.id, cap: MAX_LINE }));
    data.on('violation', (what: string) => this.opts.log?.('the guest broke the data port protocol', { vm_id: vmId, what }));
    void handle.exited.then((info) => {
      qmpCh.close();
      agent.close();
      data.close();
      assumePort?.destroy();
      if (this.handles.get(vmId) === handle) this.handles.delete(vmId);
      this.emit('exit', vmId, info);
    });
  }

  /**
   * Whether the VM's memory is kept while no QEMU runs it: it is suspended (a complete saved state is
   * on disk) or its saved state is being loaded. Its guest's processes, runs among them, live on.
   */
  holdsMemory(vmId: string): boolean {
    return this.resuming.has(vmId) || hasRecord(suspendFiles(this.vmDir(vmId)));
  }

  /** The record of the VM's saved memory, or null when it has none. */
  suspendRecord(vmId: string): Promise<SuspendRecord | null> {
    return readRecord(suspendFiles(this.vmDir(vmId)));
  }

  /** Forgets the VM's saved memory (stop, restart, reprovision, a fresh boot). */
  discardSuspended(vmId: string): Promise<void> {
    return discard(suspendFiles(this.vmDir(vmId)));
  }

  /**
   * Suspends the running VM: the guest's disks flushed, its memory and devices saved beside its disks
   * (suspend.ts), then its QEMU quits. When saving fails the VM runs on and this throws.
   */
  suspend(vmId: string, machine: { imageId: string; vcpus: number; memoryMib: number }): Promise<SuspendRecord> {
    return this.busy(() => this.suspendNow(vmId, machine));
  }

  private async suspendNow(vmId: string, machine: { imageId: string; vcpus: number; memoryMib: number }): Promise<SuspendRecord> {
    const h = this.handles.get(vmId);
    if (!h || h.stopping) throw new Error(`${vmId} is not running`);
    const f = this.files(vmId);
    const cmdline = await readFile(`/proc/${h.pid}/cmdline`, 'utf8').catch(() => '');
    // RAM mapped copy-on-write from a file (a clone's golden memory, or the base a resume mapped): only
    // the pages that differ from it are saved.
    const mem = /(?:^|\0)memory-backend-file,id=mem,[^\0]*mem-path=([^,\0]+),share=off/.exec(cmdline)?.[1];
    // A sealed copy (isolation.ts) names the file it copies: a golden memory, or this VM's base.
    const sealedFrom = mem === SEALED_MEM ? await sealedSource(h.pid) : null;
    const sf0 = suspendFiles(f.dir);
    const trusted = sealedFrom && (path.basename(sealedFrom.file) === 'mem' || path.resolve(sealedFrom.file) === path.resolve(sf0.base)) ? sealedFrom : null;
    const mapped = mem === SEALED_MEM ? trusted?.file : mem;
    // What the guest has not written yet reaches the disks: they are whole even if the memory is lost.
    let t = performance.now();
    const phases: Record<string, number> = {};
    await agentRequest(h.agent, 'sync', undefined, 10_000).catch(() => undefined);
    phases.sync_ms = performance.now() - t;
    t = performance.now();
    const sf = suspendFiles(f.dir);
    const q = <T,>(command: string, args?: object) => qmp<T>(h.qmp, command, args, 30_000);
    const about = { named_ram: cmdline.includes('memory-backend=mem'), image_id: machine.imageId, vcpus: machine.vcpus, memory_mib: machine.memoryMib, facts: h.facts };
    // The pages it changed over the file it maps, when it maps one; else QEMU's whole stream.
    const goldenState = mapped && path.resolve(mapped) !== path.resolve(sf.base) ? stateBesideMem(mapped) : null;
    let record: SuspendRecord;
    try {
      record =
        (mapped ? await savePages(q, sf, about, { pid: h.pid, path: mapped, bytes: machine.memoryMib * 1024 * 1024, goldenState, mapIno: trusted?.ino }) : null) ??
        (await save(q, sf, about, 120_000, mapped ? { path: mapped, block: RAM_BLOCK } : null));
    } catch (err) {
      // A QEMU that died under the save has its end seen before the failure is: the caller must not
      // take the VM for one that runs on.
      const alive = await qmp(h.qmp, 'query-status', undefined, 2000).then(() => true, () => false);
      if (!alive) await Promise.race([h.exited, sleep(5000)]);
      throw err;
    }
    phases.save_ms = performance.now() - t;
    t = performance.now();
    h.stopping = true;
    await qmp(h.qmp, 'quit', undefined, 2000).catch(() => undefined);
    if (!(await Promise.race([h.exited.then(() => true), sleep(5000).then(() => false)]))) {
      await killMachine(f, h.pid);
      await h.exited;
    }
    phases.quit_ms = performance.now() - t;
    this.phases.set(vmId, Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, Math.round(v)])));
    return record;
  }

  /**
   * Starts a suspended VM from its saved memory: its processes go on where they were. Throws
   * DamagedState when the saved state cannot be used (none, another shape, damaged, refused, or the
   * guest did not answer once it ran); the saved state is gone once the guest has run.
   */
  resume(spec: VmSpec): Promise<HelloFacts> {
    return this.busy(() => this.resumeNow(spec));
  }

  private async resumeNow(spec: VmSpec): Promise<HelloFacts> {
    if (this.handles.has(spec.vmId)) throw new Error(`${spec.vmId} is already running`);
    const f = this.files(spec.vmId);
    const sf = suspendFiles(f.dir);
    const record = await readRecord(sf);
    if (!record) throw new DamagedState('no complete saved memory was found');
    if (record.vcpus !== spec.vcpus || record.memory_mib !== spec.memoryMib || record.image_id !== spec.image.id) {
      throw new DamagedState('the saved memory belongs to another machine (its image or size changed)');
    }
    this.resuming.add(spec.vmId);
    try {
      // A saved difference loads over the memory it was taken against.
      if (record.base_bytes !== undefined && (await stat(sf.base).then((st) => st.size, () => -1)) !== record.base_bytes) {
        throw new DamagedState('the memory its saved state is a difference over is missing');
      }
      const ramBase = record.base_bytes !== undefined ? sf.base : undefined;
      const args = await this.commandLine(spec, { mode: 'resume', namedRam: record.named_ram, ramBase });
      let t = performance.now();
      const phases: Record<string, number> = {};
      // A page file is read and checked before its QEMU starts (about 10 ms for a starter VM): done
      // beside it, the hashing took the CPU a starting QEMU (niced) needed (spawn 230–820 ms against 190–280).
      const ramBytes = spec.memoryMib * 1024 * 1024;
      const saved = record.kind === 'pages' ? await checkPageFile(sf, record, ramBytes) : null;
      phases.check_ms = performance.now() - t;
      t = performance.now();
      const who = await machineSpawn(spec, { mode: 'resume', ramBase });
      await giveDir(f.dir, who.runAs);
      const m = await spawnMachine(this.opts.qemu, f, args, Math.min(this.opts.bootTimeoutMs, 60_000), who);
      phases.spawn_ms = performance.now() - t;
      let ran = false;
      try {
        t = performance.now();
        if (saved) await loadPages(m.qmp, sf, saved, m.pid, ramBytes, () => m.exited, m.deadline, phases, who.fds.length ? (await sealedSource(m.pid))?.ino : undefined);
        else await load(m.qmp, sf, record, () => m.exited, m.deadline);
        phases.load_ms = performance.now() - t;
        // From here the saved memory is stale: it is forgotten before the guest runs on.
        t = performance.now();
        await discard(sf, { keepBase: ramBase !== undefined });
        phases.discard_ms = performance.now() - t;
        ran = true;
        t = performance.now();
        await m.qmp('cont');
        const clockSet = await this.setResumedClock(m, record.facts as HelloFacts | undefined).then(
          () => true,
          (err: Error) => (this.opts.log?.("setting a resumed guest's clock failed", { vm_id: spec.vmId, err: err.message }), false),
        );
        phases.clock_ms = performance.now() - t;
        // An agent that could not set the clock (an older one) still has to answer.
        const facts = clockSet && record.facts ? (record.facts as HelloFacts) : await agentRequest<HelloFacts>(m.agent, 'hello', undefined, 10_000);
        this.phases.set(spec.vmId, Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, Math.round(v)])));
        this.track(spec.vmId, 'suspended', m.pid, m.qmpCh, m.agent, m.data, m.assumePort, facts, m.exit);
        return facts;
      } catch (err) {
        await m.kill();
        const tail = await this.consoleTail(spec.vmId);
        const message = `${(err as Error).message}${m.exitText() ? ` (qemu ${m.exitText()})` : ''}${tail ? `; console: ${tail}` : ''}`;
        if (err instanceof DamagedState || ran) throw new DamagedState(message);
        throw new Error(message);
      }
    } finally {
      this.resuming.delete(spec.vmId);
    }
  }

  /**
   * A resumed guest's clock stood still while it was saved: the host's first word to it is the time.
   * Its assume program takes it on its own port (protocol ASSUME_PORT_CLOCK on); an older guest's
   * agent takes it. Either answering is the sign that the guest runs.
   */
  private async setResumedClock(m: Machine, facts: HelloFacts | undefined): Promise<void> {
    const now = Date.now();
    const timeoutMs = Math.max(5000, m.deadline - now);
    if ((facts?.protocol ?? 0) < ASSUME_PORT_CLOCK) {
      await agentRequest(m.agent, 'set_clock', { time_ms: now }, timeoutMs);
      return;
    }
    const sec = Math.floor(now / 1000);
    const out = await m.assume(`sec=${sec} nsec=${(now - sec * 1000) * 1_000_000}\n`, { timeoutMs });
    if (out.clock !== 'ok') throw new Error(out.error ?? 'the assume program did not set the clock');
  }

  /**
   * Finds a QEMU left running by an earlier server process and takes it over: the pid file names it,
   * and its command line must name this VM's directory (a recycled pid is never touched).
   */
  async adopt(vmId: string): Promise<HelloFacts | null> {
    if (this.handles.has(vmId)) return this.handles.get(vmId)!.facts;
    const f = this.files(vmId);
    const pid = await machinePid(f);
    if (!pid) return null;
    try {
      const { qmpCh, agent, data, assumePort } = await connectMachine(f);
      // A suspend or a resume that an earlier process did not finish leaves the guest paused.
      const { status } = await qmp<{ status: string }>(qmpCh, 'query-status', undefined, 5000).catch(() => ({ status: 'unknown' }));
      if (status === 'inmigrate' || ((status === 'postmigrate' || status === 'paused' || status === 'finish-migrate') && hasRecord(suspendFiles(f.dir)))) {
        // Loading a saved state (it is loaded again), or saved whole (the VM is suspended): this QEMU is not needed.
        qmpCh.close();
        agent.close();
        data.close();
        assumePort?.destroy();
        await killMachine(f, pid);
        return null;
      }
      if (status === 'postmigrate' || status === 'paused' || status === 'finish-migrate') {
        // Paused in the middle of saving: the guest runs on (the suspend is asked for again).
        await qmp(qmpCh, 'migrate_cancel', undefined, 5000).catch(() => undefined);
        await qmp(qmpCh, 'cont', undefined, 5000).catch(() => undefined);
      }
      const facts = await agentRequest<HelloFacts>(agent, 'hello', undefined, 5000).catch((err: Error) => {
        qmpCh.close();
        agent.close();
        data.close();
        assumePort?.destroy();
        throw err;
      });
      // Stopped between resuming and taking its identity: not a VM yet; it boots again.
      if (!facts.assumed) throw new Error('the guest had not taken its identity');
      this.track(vmId, 'cold', pid, qmpCh, agent, data, assumePort, facts, new Promise<string>(() => undefined));
      return facts;
    } catch (err) {
      this.opts.log?.('could not adopt a running VM; stopping it', { vm_id: vmId, err });
      await killMachine(f, pid);
      return null;
    }
  }

  /** The pid in the VM's pid file, if that process is alive and is this VM's QEMU. */
  ownPid(vmId: string): Promise<number | null> {
    return machinePid(this.files(vmId));
  }

  /** One request to the VM's guest agent. */
  async request<T>(vmId: string, op: string, args: unknown, timeoutMs: number): Promise<T> {
    const h = this.handles.get(vmId);
    if (!h) throw new Error(`${vmId} is not running`);
    return agentRequest<T>(h.agent, op, args, timeoutMs);
  }

  /** Resolves once the VM's data port is in step with its guest (see dataChannel). */
  async dataReady(vmId: string): Promise<void> {
    const h = this.handles.get(vmId);
    if (!h) return;
    h.dataSynced ??= syncData(h.agent, h.data, 30_000).catch((err: Error) => {
      this.opts.log?.('the data port did not come in step; shells and files of this VM are unavailable', { vm_id: vmId, err: err.message });
      h.data.close({ error: 'unavailable', message: 'the VM data port is not in step with its guest' });
    });
    await h.dataSynced;
  }

  /** The VM's data port (byte streams to its guest agent; await dataReady first); throws when the VM is not running here. */
  dataChannel(vmId: string): DataChannel {
    const h = this.handles.get(vmId);
    if (!h || h.stopping) throw new Error(`${vmId} is not running`);
    return h.data;
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
    const f = this.files(vmId);
    const h = this.handles.get(vmId);
    if (!h) {
      const pid = await machinePid(f);
      if (pid) await killMachine(f, pid);
      return;
    }
    h.stopping = true;
    if (opts.graceful) {
      await agentRequest(h.agent, 'sync', undefined, 10_000).catch(() => undefined);
      await qmp(h.qmp, 'quit', undefined, 2000).catch(() => undefined);
      const quit = await Promise.race([h.exited.then(() => true), sleep(5000).then(() => false)]);
      if (quit) return;
    }
    await killMachine(f, h.pid);
    await h.exited;
  }

  /** Stops the VM and removes its directory with every disk (for a VM that took a standby, the link and the standby's directory). */
  async destroy(vmId: string): Promise<void> {
    await this.stop(vmId, { graceful: false });
    this.phases.delete(vmId);
    this.opts.gateway?.port.detach(vmId);
    const dir = this.vmDir(vmId);
    const target = await readlink(dir).catch(() => null);
    if (target && STANDBY_DIR.test(target)) await rm(path.join(this.opts.vmsDir, target), { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }

  /** Where the VM's persist disk is (a capture copies it). */
  persistPath(vmId: string): string {
    return this.files(vmId).persist;
  }

  /** The writable layer of the VM's root (an image build captures it). */
  upperPath(vmId: string): string {
    return this.files(vmId).upper;
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
    await this.dropStandbys();
    await Promise.all([...this.handles.keys()].map((id) => this.stop(id, { graceful: false })));
  }

  /** Lets go of every VM without stopping it (server shutdown: the next server re-adopts them). */
  release(): void {
    for (const h of this.handles.values()) {
      h.stopping = true;
      h.qmp.removeAllListeners('close');
      h.qmp.close();
      h.agent.close();
      h.data.close({ error: 'vm_not_running', message: 'the VM host is restarting' });
      h.assumePort?.destroy();
    }
    this.handles.clear();
  }
}
