/**
 * How any machine of a host is started, a VM's or a golden one's (snapshot.ts builds those with the
 * same options, before any driver exists): its command line (commandLine.ts) and the user it runs as.
 */
import path from 'node:path';
import { GOLDEN_SLOT, isolating, runAsOf, sealedCopy, type RunAs } from './isolation.ts';
import { qemuCommandLine, type MachineStart } from './commandLine.ts';
import type { MachineFiles } from './machine.ts';
import { hostTscKhz, type Accel } from './probe.ts';
import type { GatewayPort } from './egress.ts';
import type { SnapshotFiles, VmSpec } from './driver.ts';

/** What every machine of a host is made with: its QEMU, accelerator, gateway and boot patience. */
export interface MachineOptions {
  qemu: string;
  accel: Accel;
  /** The host's egress gateway, a guest's only way off its VM; null: guests reach nothing (scrubbing VMs). */
  gateway: { port: GatewayPort } | null;
  bootTimeoutMs: number;
}

/** The golden state saved beside a snapshot's memory file (a suspend of a VM mapping that memory takes its header and RAM section). */
export function stateBesideMem(mem: string): string {
  return path.join(path.dirname(mem), 'state');
}

/** Where a QEMU of its own user finds the sealed copy of the memory file it maps (descriptor 3). */
export const SEALED_MEM = '/proc/self/fd/3';

/** How a machine starts: a cold boot, a golden machine or a clone of one, or a VM's own saved memory. */
export type MachineHow =
  | { mode: 'cold' }
  | { mode: 'golden' | 'clone'; snap: SnapshotFiles }
  | { mode: 'resume'; namedRam: boolean; ramBase?: string };

/**
 * The QEMU command line of a machine (see commandLine.ts) in `files`: a VM's, or a golden machine's
 * (snapshot.ts builds those with the same options, before any driver exists).
 */
export async function machineCommandLine(o: MachineOptions, spec: VmSpec, files: MachineFiles, how: MachineHow): Promise<string[]> {
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
