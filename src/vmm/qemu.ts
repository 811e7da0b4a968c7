/**
 * The QEMU driver: one `-M microvm` process per VM, supervised. Disks, sockets and the pid file of a
 * VM live in its own directory, so a restarted server finds and re-adopts the VMs that still run.
 * It knows nothing of tenants or money.
 *
 * The reconciler sees it through VmDriver (driver.ts): a few coarse calls that bring a VM to where it
 * should be. The concerns behind them each have a file: the VMs it runs running.ts, a machine's
 * process, start and adoption launch.ts (its command line commandLine.ts, its disks disks.ts, its
 * process and sockets machine.ts), standby claims standbyClaims.ts (the pool standby.ts), suspend and
 * resume suspendResume.ts (the saved state suspend.ts), the guest's channels guestChannels.ts, disk
 * usage and TCG statistics usage.ts. This file holds them together.
 */
import { EventEmitter } from 'node:events';
import { readdir, readlink, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DataChannel } from './dataChannel.ts';
import { netOfSlot, slotOfGuest, STANDBY_SLOTS } from './commandLine.ts';
import { DiskMaker } from './disks.ts';
import { STANDBY_DIR, StandbyPool, type StandbyShape } from './standby.ts';
import { consoleTail, machinePid } from './machine.ts';
import { DamagedState } from './suspend.ts';
import type { SuspendRecord } from './suspendRecord.ts';
import { machineCommandLine } from './machineStart.ts';
import { RunningVms, StartTurns, type DriverOptions } from './running.ts';
import { adoptVm, startVm, stopVm } from './launch.ts';
import { claimStandby, launchStandby } from './standbyClaims.ts';
import { SuspendResume } from './suspendResume.ts';
import * as channels from './guestChannels.ts';
import * as usage from './usage.ts';
import { agentRequest, qmp } from './channel.ts';
import { mendFrozenDisks, type RunningMachine } from './branch.ts';
import type { ActualState, Resumed, SavedMachine, SnapshotFiles, Started, StartedFrom, VmDriver, VmSpec } from './driver.ts';
import type { ExecArgs, ExecResult, HelloFacts } from '../wire/protocol.ts';

export type { ExitInfo, SnapshotFiles, SnapshotSource, StartedFrom, VmSpec } from './driver.ts';
export type { GatewayPort } from './egress.ts';
export { machineCommandLine, machineSpawn, stateBesideMem, type MachineOptions } from './machineStart.ts';
export type { DriverOptions } from './running.ts';

export class QemuDriver extends EventEmitter implements VmDriver {
  private readonly vms: RunningVms;
  private readonly disks: DiskMaker;
  /** How long each part of a VM's last start took (the reconciler logs them). */
  readonly phases: Map<string, Record<string, number>>;
  /** Standby VMs of the shape keepStandby names (standby.ts). */
  private readonly standby: StandbyPool;
  private readonly saved: SuspendResume;
  private readonly turns: StartTurns;

  constructor(readonly opts: DriverOptions) {
    super();
    this.vms = new RunningVms(opts, this, () => this.standby.busy());
    this.phases = this.vms.phases;
    this.disks = new DiskMaker(opts.blankDir);
    this.saved = new SuspendResume(this.vms);
    this.turns = new StartTurns({ boot: opts.maxConcurrentBoots ?? 4, resume: opts.maxConcurrentResumes ?? 4 });
    this.standby = new StandbyPool({
      vmsDir: opts.vmsDir,
      hasSnapshot: async (shape) => (await opts.snapshots?.has({ vmId: 'standby', ...shape, netSlot: STANDBY_SLOTS.first, hostname: 'standby' })) ?? false,
      launch: (id, shape, netSlot) => launchStandby(this.vms, this.disks, id, shape, netSlot),
      idleShare: opts.standbyIdleShare,
      slots: opts.standbySlots,
      imageStandbys: opts.standbyImages,
      slotsInUse: async () => {
        const held = (await opts.standbySlotsHeld?.()) ?? new Set<number>();
        // A running VM that took a standby holds its slot (its row may not name it yet).
        for (const h of this.vms.handles.values()) {
          const slot = slotOfGuest(h.facts.ipv4);
          if (slot !== undefined) held.add(slot);
        }
        return held;
      },
      // A new VM's first work (a shell, a run) comes right after its start: a standby made then would
      // take CPU from it.
      quiet: () => this.vms.quiet() && !opts.busyElsewhere?.(),
      log: opts.log,
    });
  }

  // The reconciler's calls (VmDriver, driver.ts): one VM brought to where it should be.

  async actual(vmId: string): Promise<ActualState> {
    if (this.isRunning(vmId)) return 'running';
    if (await this.suspendRecord(vmId)) return 'suspended';
    return (await this.ownPid(vmId)) ? 'stray' : 'off';
  }

  async takeOver(known: string[]): Promise<number> {
    // A snapshot's freeze of a VM's disks that a kill cut short is finished first (branch.ts).
    await Promise.all((await this.listVmDirs()).map(async (dir) => mendFrozenDisks(this.vmDir(dir), (await this.ownPid(dir)) !== null)));
    // All at once: a guest killed mid-boot makes its adoption wait for its agent's answer.
    const adopted = (await Promise.all(known.map((vmId) => this.adopt(vmId)))).filter(Boolean).length;
    // Standby VMs an earlier process made and no VM took.
    await this.sweepStandbys();
    // A directory without a row (its create rolled back, or its row is gone): stop and remove it.
    const owned = new Set(known);
    const orphans = (await this.listVmDirs()).filter((dir) => !owned.has(dir));
    await Promise.all(
      orphans.map((dir) => {
        this.opts.log?.('removing a VM directory that no VM row owns', { vm_id: dir });
        return this.destroy(dir);
      }),
    );
    return adopted;
  }

  async run(spec: VmSpec, { fresh }: { fresh: boolean }): Promise<Started> {
    const { vmId } = spec;
    if (this.isRunning(vmId) || (await this.ownPid(vmId))) await this.stop(vmId);
    await this.discardSuspended(vmId);
    // A new VM of the standby shape takes a standby VM: its start is the standby's second assume line.
    if (!fresh) {
      const took = await this.claimStandby(spec);
      if (took) return { facts: took.facts, ipv4: took.facts.ipv4 ?? netOfSlot(took.netSlot).guest, startedFrom: 'standby', netSlot: took.netSlot };
    }
    const release = await this.turns.take((await this.willResume(spec)) ? 'resume' : 'boot');
    try {
      const t0 = performance.now();
      await this.prepareDisks(spec, fresh);
      const disksMs = performance.now() - t0;
      const facts = await this.start(spec);
      this.vms.setPhases(vmId, { disks_ms: disksMs, ...this.phases.get(vmId) });
      return { facts, ipv4: facts.ipv4 ?? netOfSlot(spec.netSlot).guest, startedFrom: this.startedFrom(vmId) };
    } finally {
      release();
    }
  }

  async resumeSaved(spec: VmSpec): Promise<Resumed> {
    if (this.isRunning(spec.vmId) || (await this.ownPid(spec.vmId))) await this.stop(spec.vmId);
    const release = await this.turns.take('resume');
    try {
      const facts = await this.resume(spec);
      return { resumed: true, up: { facts, ipv4: facts.ipv4 ?? netOfSlot(spec.netSlot).guest, startedFrom: 'suspended' } };
    } catch (err) {
      if (err instanceof DamagedState) return { resumed: false, damage: err.message };
      throw err;
    } finally {
      release();
    }
  }

  async halt(vmId: string): Promise<void> {
    await this.stop(vmId);
    // A stopped VM keeps its disks, not its memory.
    await this.discardSuspended(vmId);
  }

  // What the VMs it runs are, and what they take.

  vmDir(vmId: string): string {
    return this.vms.vmDir(vmId);
  }

  isRunning(vmId: string): boolean {
    return this.vms.handles.has(vmId);
  }

  facts(vmId: string): HelloFacts | undefined {
    return this.vms.get(vmId)?.facts;
  }

  /** Whether the running VM resumed from a snapshot or booted cold. */
  startedFrom(vmId: string): StartedFrom | undefined {
    return this.vms.get(vmId)?.startedFrom;
  }

  pidOf(vmId: string): number | undefined {
    return this.vms.get(vmId)?.pid;
  }

  /**
   * Under TCG, what the running VM's QEMU has translated so far, by its own count (HMP `info jit`):
   * blocks of guest code and bytes of host code. Null under KVM (nothing is translated) or for a VM
   * not running here.
   */
  async translated(vmId: string): Promise<{ blocks: number; codeBytes: number } | null> {
    const h = this.vms.get(vmId);
    if (!h || this.opts.accel !== 'tcg') return null;
    return usage.translated(h);
  }

  /** The running VM's machine, for a snapshot of it (branch.ts); null when it does not run here. */
  snapshotMachine(vmId: string): RunningMachine | null {
    const h = this.vms.get(vmId);
    if (!h || h.stopping) return null;
    return {
      pid: h.pid,
      facts: h.facts,
      qmp: (command, args) => qmp(h.qmp, command, args, 30_000),
      sync: () => agentRequest(h.agent, 'sync', undefined, 10_000).then(() => undefined),
    };
  }

  /** Runs host work that standby VMs give way to (a snapshot's). */
  busyWith<T>(work: () => Promise<T>): Promise<T> {
    return this.vms.busy(work);
  }

  /** Bytes the VM's disks take on the host. */
  diskUsage(vmId: string): Promise<number> {
    return usage.diskUsage(this.vms.files(vmId));
  }

  /** VM directories on disk (running or not). */
  async listVmDirs(): Promise<string[]> {
    return (await readdir(this.opts.vmsDir).catch(() => [] as string[])).filter((n) => /^vm_[A-Za-z0-9]+$/.test(n));
  }

  /** Where the VM's persist disk is (a capture copies it). */
  persistPath(vmId: string): string {
    return this.vms.files(vmId).persist;
  }

  /** The writable layer of the VM's root (an image build captures it). */
  upperPath(vmId: string): string {
    return this.vms.files(vmId).upper;
  }

  // A machine's process: disks, start, adoption, stop (launch.ts).

  /** Makes the VM's disks: the persist disk once, the root layer when missing or when `freshRoot` (see disks.ts). */
  async prepareDisks(spec: VmSpec, freshRoot: boolean): Promise<void> {
    await this.disks.prepare(this.vms.files(spec.vmId), spec, freshRoot);
  }

  /** The QEMU command line of a VM's machine. */
  commandLine(spec: VmSpec, how: { mode: 'cold' } | { mode: 'clone'; snap: SnapshotFiles } | { mode: 'resume'; namedRam: boolean; ramBase?: string }): Promise<string[]> {
    return machineCommandLine(this.opts, spec, this.vms.files(spec.vmId), how);
  }

  /** The last lines the guest printed on its console: what a failed boot reports. */
  consoleTail(vmId: string, lines = 5): Promise<string> {
    return consoleTail(this.vms.files(vmId), lines);
  }

  /** Whether a start of this VM would resume its shape's snapshot (a fraction of a cold boot's work). */
  async willResume(spec: VmSpec): Promise<boolean> {
    return (await this.opts.snapshots?.has(spec)) ?? false;
  }

  /**
   * Starts the VM and answers once its guest agent is this VM: from its shape's snapshot when there is
   * one, else (or when resuming fails: logged, never a failed VM) by a cold boot.
   */
  start(spec: VmSpec): Promise<HelloFacts> {
    return startVm(this.vms, spec);
  }

  /**
   * Finds a QEMU left running by an earlier server process and takes it over: the pid file names it,
   * and its command line must name this VM's directory (a recycled pid is never touched).
   */
  adopt(vmId: string): Promise<HelloFacts | null> {
    return adoptVm(this.vms, vmId);
  }

  /** The pid in the VM's pid file, if that process is alive and is this VM's QEMU. */
  ownPid(vmId: string): Promise<number | null> {
    return machinePid(this.vms.files(vmId));
  }

  /** Stops the VM: flush the guest's disks through its agent, then quit QEMU; kill it if that hangs. */
  stop(vmId: string, opts: { graceful: boolean } = { graceful: true }): Promise<void> {
    return stopVm(this.vms, vmId, opts);
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

  /** Stops every VM this driver tracks (tests and benchmarks; a normal shutdown leaves VMs running). */
  async stopAll(): Promise<void> {
    await this.dropStandbys();
    await Promise.all([...this.vms.handles.keys()].map((id) => this.stop(id, { graceful: false })));
  }

  /** Lets go of every VM without stopping it (server shutdown: the next server re-adopts them). */
  release(): void {
    this.vms.release();
  }

  // Standby VMs (standby.ts, standbyClaims.ts).

  /**
   * Keeps `count` standby VMs (the driver's `standby` option unless given) of this shape (null: none),
   * and one each of the `images` images of one's own last started (unchanged unless given): a new VM
   * of the shape then starts by taking one (claimStandby). See standby.ts.
   */
  keepStandby(shape: StandbyShape | null, count = this.opts.standby ?? 0, images?: number): void {
    this.standby.keep(shape, count, images);
  }

  /** The shape standby VMs are kept of (null: none). */
  keptStandbyShape(): StandbyShape | null {
    return this.standby.keptShape;
  }

  /** No VM start under way here, and none just ended. */
  quiet(): boolean {
    return this.vms.quiet();
  }

  /** How many standby VMs are ready now (`images`: of images of one's own). */
  standbyCount(of?: 'images'): number {
    return of === 'images' ? this.standby.imageCount : this.standby.count;
  }

  /** Ends the standby VMs and makes no more (the server is stopping). */
  dropStandbys(): Promise<void> {
    return this.standby.close();
  }

  /** Removes the standbys an earlier server left (their QEMU with them); a VM's link keeps its own. */
  sweepStandbys(): Promise<void> {
    return this.standby.sweep();
  }

  /**
   * Starts a new VM by taking a standby of its shape (see standbyClaims.ts); null when it takes none
   * and starts as usual. `netSlot`: the standby's network slot, the VM's now (the caller records it);
   * `keptPid`: the program its shape keeps running (StandbyShape.process).
   */
  claimStandby(spec: VmSpec): Promise<{ facts: HelloFacts; netSlot: number; keptPid?: number } | null> {
    return this.vms.busy(() => claimStandby(this.vms, this.standby, spec));
  }

  // Suspend and resume (suspendResume.ts).

  /**
   * Whether the VM's memory is kept while no QEMU runs it: it is suspended (a complete saved state is
   * on disk) or its saved state is being loaded. Its guest's processes, runs among them, live on.
   */
  holdsMemory(vmId: string): boolean {
    return this.saved.holdsMemory(vmId);
  }

  /** The record of the VM's saved memory, or null when it has none. */
  suspendRecord(vmId: string): Promise<SuspendRecord | null> {
    return this.saved.record(vmId);
  }

  /** Forgets the VM's saved memory (stop, restart, reprovision, a fresh boot). */
  discardSuspended(vmId: string): Promise<void> {
    return this.saved.discard(vmId);
  }

  /**
   * Suspends the running VM: the guest's disks flushed, its memory and devices saved beside its disks
   * (suspend.ts), then its QEMU quits. When saving fails the VM runs on and this throws.
   */
  suspend(vmId: string, machine: SavedMachine): Promise<SuspendRecord> {
    return this.saved.suspend(vmId, machine);
  }

  /**
   * Starts a suspended VM from its saved memory: its processes go on where they were. Throws
   * DamagedState when the saved state cannot be used (none, another shape, damaged, refused, or the
   * guest did not answer once it ran); the saved state is gone once the guest has run.
   */
  resume(spec: VmSpec): Promise<HelloFacts> {
    return this.saved.resume(spec);
  }

  // The guest's channels (guestChannels.ts).

  /** One request to the VM's guest agent. */
  request<T>(vmId: string, op: string, args: unknown, timeoutMs: number): Promise<T> {
    return channels.request<T>(this.vms, vmId, op, args, timeoutMs);
  }

  /** Resolves once the VM's data port is in step with its guest (see dataChannel). */
  dataReady(vmId: string): Promise<void> {
    return channels.dataReady(this.vms, vmId);
  }

  /** The VM's data port (byte streams to its guest agent; await dataReady first); throws when the VM is not running here. */
  dataChannel(vmId: string): DataChannel {
    return channels.dataChannel(this.vms, vmId);
  }

  exec(vmId: string, args: ExecArgs, timeoutMs: number): Promise<ExecResult> {
    return this.request<ExecResult>(vmId, 'exec', args, timeoutMs);
  }

  async ping(vmId: string): Promise<number> {
    const t = process.hrtime.bigint();
    await this.request(vmId, 'ping', undefined, 5000);
    return Number(process.hrtime.bigint() - t) / 1e6;
  }
}
