/**
 * A VM driver in memory, for the reconciler's tests: it keeps VmDriver's promises (src/vmm/driver.ts)
 * the way QemuDriver keeps them, with no QEMU. A VM here is its disks (a root layer that a fresh start
 * replaces, a persist disk), at most one process (ours, or a stray one), and its saved memory. The
 * test makes things happen that a real host sees: a QEMU that dies, a start or a suspend that fails,
 * saved memory that is damaged, a standby ready to take, QEMUs an earlier process left running.
 */
import { EventEmitter } from 'node:events';
import { netOfSlot, STANDBY_SLOTS } from '../src/vmm/commandLine.ts';
import type { ActualState, ExitInfo, Resumed, SavedMachine, Started, StartedFrom, VmDriver, VmSpec } from '../src/vmm/driver.ts';
import type { SuspendRecord } from '../src/vmm/suspendRecord.ts';
import type { HelloFacts } from '../src/wire/protocol.ts';

interface FakeVm {
  /** Made on its first start; a fresh start makes its root layer again. */
  disks: { root: number; persist: number } | null;
  process: { ours: true; facts: HelloFacts; startedFrom: StartedFrom; spec: VmSpec } | { ours: false } | null;
  saved: (SavedMachine & { damaged: boolean }) | null;
}

let layers = 0;

export class FakeDriver extends EventEmitter implements VmDriver {
  readonly phases = new Map<string, Record<string, number>>();
  readonly vms = new Map<string, FakeVm>();
  /** Each call that changes something, in order (`run:fresh` for a fresh start). */
  readonly calls: string[] = [];
  /** What the next start, resume or suspend of a VM does instead of succeeding. */
  readonly failNext = new Map<string, { start?: string; resume?: string; suspend?: { message: string; then: 'runs on' | 'dies' } }>();
  /** Standbys ready to take, by shape (`vcpus:memoryMib:diskGib:imageId`). */
  readonly standbys: string[] = [];
  /** QEMUs an earlier process left running (takeOver finds them). */
  readonly leftRunning = new Map<string, VmSpec>();

  private vm(vmId: string): FakeVm {
    let vm = this.vms.get(vmId);
    if (!vm) this.vms.set(vmId, (vm = { disks: null, process: null, saved: null }));
    return vm;
  }

  async actual(vmId: string): Promise<ActualState> {
    const vm = this.vms.get(vmId);
    if (vm?.process?.ours) return 'running';
    if (vm?.saved) return 'suspended';
    return vm?.process ? 'stray' : 'off';
  }

  isRunning(vmId: string): boolean {
    return this.vms.get(vmId)?.process?.ours === true;
  }

  async takeOver(known: string[]): Promise<number> {
    let adopted = 0;
    for (const [vmId, spec] of this.leftRunning) {
      if (!known.includes(vmId)) continue;
      this.vm(vmId).process = { ours: true, facts: factsOf(spec), startedFrom: 'cold', spec };
      adopted++;
    }
    this.leftRunning.clear();
    this.standbys.length = 0;
    for (const vmId of this.vms.keys()) if (!known.includes(vmId)) await this.destroy(vmId);
    return adopted;
  }

  async run(spec: VmSpec, { fresh }: { fresh: boolean }): Promise<Started> {
    this.calls.push(`run${fresh ? ':fresh' : ''} ${spec.vmId}`);
    const vm = this.vm(spec.vmId);
    this.end(spec.vmId, true);
    vm.saved = null;
    // As standbyClaims.ts: a VM that never ran and starts from no template or image layer.
    const shape = `${spec.vcpus}:${spec.memoryMib}:${spec.diskGib}:${spec.image.id}`;
    const i = this.standbys.indexOf(shape);
    if (!fresh && !vm.disks && !spec.persistBacking && !spec.upperBacking && i >= 0) {
      this.standbys.splice(i, 1);
      const netSlot = STANDBY_SLOTS.first + i;
      vm.disks = { root: ++layers, persist: ++layers };
      vm.process = { ours: true, facts: factsOf({ ...spec, netSlot }), startedFrom: 'standby', spec };
      return { facts: vm.process.facts, ipv4: netOfSlot(netSlot).guest, startedFrom: 'standby', netSlot };
    }
    vm.disks = { root: fresh || !vm.disks ? ++layers : vm.disks.root, persist: vm.disks?.persist ?? ++layers };
    const failure = this.takeFailure(spec.vmId, 'start');
    // A start that fails leaves no QEMU; its disks stay.
    if (failure) throw new Error(failure);
    vm.process = { ours: true, facts: factsOf(spec), startedFrom: 'snapshot', spec };
    return { facts: vm.process.facts, ipv4: netOfSlot(spec.netSlot).guest, startedFrom: 'snapshot' };
  }

  async resumeSaved(spec: VmSpec): Promise<Resumed> {
    this.calls.push(`resume ${spec.vmId}`);
    const vm = this.vm(spec.vmId);
    this.end(spec.vmId, true);
    const saved = vm.saved;
    // As suspendResume.ts: what cannot be used is a damage (the VM boots from its disks), anything else throws and the memory stays.
    if (!saved) return { resumed: false, damage: 'no complete saved memory was found' };
    if (saved.vcpus !== spec.vcpus || saved.memoryMib !== spec.memoryMib || saved.imageId !== spec.image.id) {
      return { resumed: false, damage: 'the saved memory belongs to another machine (its image or size changed)' };
    }
    if (saved.damaged) return { resumed: false, damage: 'the saved state does not match its checksum' };
    const failure = this.takeFailure(spec.vmId, 'resume');
    if (failure) throw new Error(failure);
    vm.saved = null;
    vm.process = { ours: true, facts: factsOf(spec), startedFrom: 'suspended', spec };
    return { resumed: true, up: { facts: vm.process.facts, ipv4: netOfSlot(spec.netSlot).guest, startedFrom: 'suspended' } };
  }

  async suspend(vmId: string, machine: SavedMachine): Promise<SuspendRecord> {
    this.calls.push(`suspend ${vmId}`);
    const vm = this.vms.get(vmId);
    if (!vm?.process?.ours) throw new Error(`${vmId} is not running`);
    const failure = this.failNext.get(vmId)?.suspend;
    if (failure) {
      this.failNext.delete(vmId);
      // A QEMU that died under the save has its end said before the failure is.
      if (failure.then === 'dies') this.crash(vmId, 'exited with signal SIGKILL');
      throw new Error(failure.message);
    }
    vm.saved = { ...machine, damaged: false };
    this.end(vmId, true);
    return { bytes: machine.memoryMib * 1024 * 1024 } as SuspendRecord;
  }

  async halt(vmId: string): Promise<void> {
    this.calls.push(`halt ${vmId}`);
    this.end(vmId, true);
    const vm = this.vms.get(vmId);
    if (vm) vm.saved = null;
  }

  async destroy(vmId: string): Promise<void> {
    this.calls.push(`destroy ${vmId}`);
    this.end(vmId, true);
    this.vms.delete(vmId);
  }

  facts(vmId: string): HelloFacts | undefined {
    const p = this.vms.get(vmId)?.process;
    return p?.ours ? p.facts : undefined;
  }

  startedFrom(vmId: string): StartedFrom | undefined {
    const p = this.vms.get(vmId)?.process;
    return p?.ours ? p.startedFrom : undefined;
  }

  /** The VM's QEMU ends without being asked (a kill -9, a guest panic). */
  crash(vmId: string, reason = 'exited with signal SIGKILL'): void {
    const vm = this.vms.get(vmId);
    if (!vm?.process?.ours) throw new Error(`${vmId} is not running`);
    vm.process = null;
    this.emit('exit', vmId, { expected: false, reason } satisfies ExitInfo);
  }

  /** A QEMU of the VM's directory that this driver does not run. */
  stray(vmId: string): void {
    this.vm(vmId).process = { ours: false };
  }

  private end(vmId: string, expected: boolean): void {
    const vm = this.vms.get(vmId);
    if (!vm?.process) return;
    const ours = vm.process.ours;
    vm.process = null;
    if (ours) this.emit('exit', vmId, { expected, reason: 'exited with code 0' } satisfies ExitInfo);
  }

  private takeFailure(vmId: string, what: 'start' | 'resume'): string | undefined {
    const f = this.failNext.get(vmId);
    const message = f?.[what];
    if (f && message) delete f[what];
    return message;
  }
}

function factsOf(spec: VmSpec): HelloFacts {
  return {
    protocol: 3,
    hostname: spec.hostname,
    kernel: '6.12.0-fake',
    node: 'v20',
    boot_id: `boot-${++layers}`,
    uptime_s: 0,
    ipv4: netOfSlot(spec.netSlot).guest,
    persist: { path: '/persist', device: '/dev/vdb', mounted: true, formatted_now: false },
    harnesses: ['echo'],
    assumed: true,
    instance_id: `instance-${layers}`,
  };
}
