/**
 * A VM's QEMU process: started (resuming its shape's golden snapshot with its own disks plugged in
 * after it resumes, or by a cold boot; either way the guest's assume program makes it this VM),
 * adopted from an earlier server process, and stopped.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentRequest, qmp, type JsonLineChannel } from './channel.ts';
import { giveDir } from './isolation.ts';
import { netOfSlot, ownDiskHotplugArgs } from './commandLine.ts';
import { connectMachine, consoleTail, killMachine, machinePid, resumeIncoming, spawnMachine } from './machine.ts';
import { hasRecord, suspendFiles } from './suspendRecord.ts';
import { machineCommandLine, machineSpawn } from './machineStart.ts';
import type { RunningVms } from './running.ts';
import type { SnapshotFiles, VmSpec } from './driver.ts';
import { assumeLine, factsFromAssumed, type AssumeArgs, type HelloFacts } from '../wire/protocol.ts';

/** The assume program's own steps (assume.pl answers `steps_ms=name:ms,...`), as phases `assume_<name>_ms`. */
export function assumeSteps(out: Record<string, string>): Record<string, number> {
  const steps: Record<string, number> = {};
  for (const [name, ms] of (out.steps_ms ?? '').split(',').map((p) => p.split(':'))) if (name && Number.isFinite(Number(ms))) steps[`assume_${name}_ms`] = Number(ms);
  return steps;
}

/** The identity a guest's assume program gives it: this VM's name, address, machine id, clock and fresh randomness. */
export function assumeArgs(spec: VmSpec): AssumeArgs {
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

/**
 * Starts the VM and answers once its guest agent is this VM: from its shape's snapshot when there is
 * one, else (or when resuming fails: logged, never a failed VM) by a cold boot.
 */
export async function startVm(vms: RunningVms, spec: VmSpec): Promise<HelloFacts> {
  if (vms.handles.has(spec.vmId)) throw new Error(`${spec.vmId} is already running`);
  const { opts } = vms;
  return vms.busy(async () => {
    const snap = (await opts.snapshots?.find(spec)) ?? null;
    if (snap) {
      try {
        return await launch(vms, spec, snap);
      } catch (err) {
        opts.log?.('resuming from the snapshot failed; booting cold', { vm_id: spec.vmId, snapshot: snap.key, err });
        opts.snapshots?.failed(snap, err as Error);
      }
    }
    return await launch(vms, spec, null);
  });
}

async function launch(vms: RunningVms, spec: VmSpec, snap: SnapshotFiles | null): Promise<HelloFacts> {
  const { opts } = vms;
  const f = vms.files(spec.vmId);
  const args = await machineCommandLine(opts, spec, f, snap ? { mode: 'clone', snap } : { mode: 'cold' });
  // A resume is quick or broken; a cold boot under emulation takes seconds.
  const timeoutMs = snap ? Math.min(opts.bootTimeoutMs, 30_000) : opts.bootTimeoutMs;
  const t0 = performance.now();
  const who = await machineSpawn(spec, snap ? { mode: 'clone', snap } : { mode: 'cold' });
  await giveDir(f.dir, who.runAs);
  const m = await spawnMachine(opts.qemu, f, args, timeoutMs, who);
  const phases: Record<string, number> = { spawn_ms: performance.now() - t0 };
  try {
    if (snap) {
      // The incoming state loads while paused (-S); then run, with the VM's own disks plugged in.
      await resumeIncoming(m, f, snap.state, ownDiskHotplugArgs(), phases);
    } else if (!(await awaitHello(m.agent, m.deadline, () => m.exited))) {
      throw new Error(m.exited ? 'the guest stopped during boot' : `the guest agent did not answer within ${timeoutMs / 1000} s`);
    }
    // The assume program answers with everything the host needs; the agent, resumed alongside,
    // answers its first request when one comes.
    const t = performance.now();
    const out = await m.assume(assumeLine(assumeArgs(spec)));
    phases.assume_ms = performance.now() - t;
    // The assume program's own steps (assume.pl: `name:ms,...`).
    Object.assign(phases, assumeSteps(out));
    if (out.error) throw new Error(`the guest could not take its identity: ${out.error}`);
    vms.setPhases(spec.vmId, phases);
    const facts = factsFromAssumed(out);
    if (!facts.persist.mounted) opts.log?.('the persist disk is not mounted', { vm_id: spec.vmId, err: facts.persist.error });
    vms.track(spec.vmId, snap ? 'snapshot' : 'cold', m, facts, m.exit);
    return facts;
  } catch (err) {
    await m.kill();
    const tail = await consoleTail(f, 5);
    throw new Error(`${(err as Error).message}${m.exitText() ? ` (qemu ${m.exitText()})` : ''}${tail ? `; console: ${tail}` : ''}`);
  }
}

async function awaitHello(agent: JsonLineChannel, deadline: number, gone: () => boolean): Promise<HelloFacts | null> {
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

/**
 * Finds a QEMU left running by an earlier server process and takes it over: the pid file names it,
 * and its command line must name this VM's directory (a recycled pid is never touched).
 */
export async function adoptVm(vms: RunningVms, vmId: string): Promise<HelloFacts | null> {
  if (vms.handles.has(vmId)) return vms.handles.get(vmId)!.facts;
  const f = vms.files(vmId);
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
    vms.track(vmId, 'cold', { pid, qmpCh, agent, data, assumePort }, facts, new Promise<string>(() => undefined));
    return facts;
  } catch (err) {
    vms.opts.log?.('could not adopt a running VM; stopping it', { vm_id: vmId, err });
    await killMachine(f, pid);
    return null;
  }
}

/** Stops the VM: flush the guest's disks through its agent, then quit QEMU; kill it if that hangs. */
export async function stopVm(vms: RunningVms, vmId: string, opts: { graceful: boolean }): Promise<void> {
  const f = vms.files(vmId);
  const h = vms.handles.get(vmId);
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
