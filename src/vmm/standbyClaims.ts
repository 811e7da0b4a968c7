/**
 * Standby VMs from the driver's side: how one is made (a clone of its shape's golden VM with fresh
 * disks and a provisional identity), and how a new VM takes one over. The pool that keeps them is
 * standby.ts.
 */
import { lstat, rm, symlink } from 'node:fs/promises';
import { giveDir } from './isolation.ts';
import { ownDiskHotplugArgs } from './commandLine.ts';
import type { DiskMaker } from './disks.ts';
import { resumeIncoming, spawnMachine, type Machine } from './machine.ts';
import { standbyKey, type StandbyPool, type StandbyShape } from './standby.ts';
import { machineCommandLine, machineSpawn } from './machineStart.ts';
import { assumeArgs, assumeSteps } from './launch.ts';
import type { RunningVms } from './running.ts';
import type { VmSpec } from './driver.ts';
import { assumeLine, factsFromAssumed, type HelloFacts } from '../wire/protocol.ts';

/** A standby's machine: a clone of the shape's golden VM with fresh disks and a provisional identity. */
export async function launchStandby(
  vms: RunningVms,
  disks: DiskMaker,
  id: string,
  shape: StandbyShape,
  netSlot: number,
): Promise<{ m: Machine; phases: Record<string, number> }> {
  const { opts } = vms;
  const spec: VmSpec = { vmId: id, ...shape, netSlot, hostname: 'standby', persistBacking: null };
  const snap = await opts.snapshots?.find(spec);
  if (!snap) throw new Error('its shape has no snapshot');
  await disks.prepare(vms.files(spec.vmId), spec, true);
  const t0 = performance.now();
  const who = await machineSpawn(spec, { mode: 'clone', snap });
  await giveDir(vms.vmDir(id), who.runAs);
  const m = await spawnMachine(opts.qemu, vms.files(id), await machineCommandLine(opts, spec, vms.files(id), { mode: 'clone', snap }), 30_000, who);
  try {
    const phases: Record<string, number> = { spawn_ms: performance.now() - t0 };
    await resumeIncoming(m, vms.files(id), snap.state, ownDiskHotplugArgs(), phases);
    const t = performance.now();
    const out = await m.assume(assumeLine({ ...assumeArgs(spec), standby: true }));
    if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
    phases.assume_ms = performance.now() - t;
    return { m, phases };
  } catch (err) {
    await m.kill();
    throw err;
  }
}

/**
 * Starts a new VM by taking a standby of its shape (an image of one's own is part of it), when there is
 * one and the VM has never run (no directory) nor starts from a template. Answers null otherwise, or when the standby fails (it is
 * dropped): the VM then starts as usual. The VM's directory becomes a link to the standby's, and the
 * VM takes the standby's network slot (`netSlot`: the caller records it), and the program its shape
 * keeps running (`keptPid`: the caller follows it, attachProcess).
 */
export async function claimStandby(vms: RunningVms, standby: StandbyPool, spec: VmSpec): Promise<{ facts: HelloFacts; netSlot: number; keptPid?: number } | null> {
  standby.noteStart(spec);
  if (spec.persistBacking || vms.handles.has(spec.vmId)) return null;
  const key = standbyKey(spec);
  if (!standby.has(key)) return null;
  const dir = vms.vmDir(spec.vmId);
  if (await lstat(dir).then(() => true, () => false)) return null;
  const s = standby.take(key);
  if (!s) return null;
  const t0 = performance.now();
  try {
    const out = await s.m.assume(assumeLine(assumeArgs({ ...spec, netSlot: s.netSlot })), { timeoutMs: 30_000 });
    if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
    const phases: Record<string, number> = { standby_assume_ms: performance.now() - t0 };
    Object.assign(phases, assumeSteps(out));
    // From here the standby is this VM: its directory is the VM's (a restarted server adopts it by this name).
    await symlink(s.id, dir);
    const facts = factsFromAssumed(out);
    vms.setPhases(spec.vmId, { ...s.phases, ...phases });
    vms.track(spec.vmId, 'standby', s.m, facts, s.m.exit);
    return { facts, netSlot: s.netSlot, ...(s.kept ? { keptPid: s.kept.pid } : {}) };
  } catch (err) {
    vms.opts.log?.('taking a standby VM failed; starting as usual', { vm_id: spec.vmId, standby: s.id, err: (err as Error).message });
    await rm(dir, { force: true });
    await s.m.kill();
    await rm(vms.vmDir(s.id), { recursive: true, force: true });
    return null;
  } finally {
    vms.startEnded();
    standby.fill();
  }
}
