/**
 * Suspend and resume of a running VM: its guest's disks flushed, its memory and devices saved beside
 * its disks (suspend.ts), its QEMU gone; later a QEMU loads them and the guest goes on where it was.
 */
import path from 'node:path';
import { readFile, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentRequest, qmp } from './channel.ts';
import { giveDir, sealedSource } from './isolation.ts';
import { consoleTail, killMachine, spawnMachine, type Machine } from './machine.ts';
import { checkPageFile, DamagedState, load, loadPages, save, savePages } from './suspend.ts';
import { discard, hasRecord, readRecord, suspendFiles, type SuspendRecord } from './suspendRecord.ts';
import { machineCommandLine, machineSpawn, SEALED_MEM, stateBesideMem } from './machineStart.ts';
import type { RunningVms } from './running.ts';
import type { SavedMachine, VmSpec } from './driver.ts';
import { ASSUME_PORT_CLOCK, type HelloFacts } from '../wire/protocol.ts';
import { branchMarkOf } from './branch.ts';
import { takeBranchIdentity } from './branchResume.ts';

/** The RAM block of the machine's memory backend (id `mem`), as QEMU's migration stream names it. */
const RAM_BLOCK = 'mem';

export class SuspendResume {
  /** VMs whose saved memory is being loaded: their guest's state is neither saved nor running. */
  private readonly resuming = new Set<string>();

  constructor(private readonly vms: RunningVms) {}

  /**
   * Whether the VM's memory is kept while no QEMU runs it: it is suspended (a complete saved state is
   * on disk) or its saved state is being loaded. Its guest's processes, runs among them, live on.
   */
  holdsMemory(vmId: string): boolean {
    return this.resuming.has(vmId) || hasRecord(suspendFiles(this.vms.vmDir(vmId)));
  }

  /** The record of the VM's saved memory, or null when it has none. */
  record(vmId: string): Promise<SuspendRecord | null> {
    return readRecord(suspendFiles(this.vms.vmDir(vmId)));
  }

  /** Forgets the VM's saved memory (stop, restart, reprovision, a fresh boot). */
  discard(vmId: string): Promise<void> {
    return discard(suspendFiles(this.vms.vmDir(vmId)));
  }

  /**
   * Suspends the running VM: the guest's disks flushed, its memory and devices saved beside its disks
   * (suspend.ts), then its QEMU quits. When saving fails the VM runs on and this throws.
   */
  suspend(vmId: string, machine: SavedMachine): Promise<SuspendRecord> {
    return this.vms.busy(() => this.suspendNow(vmId, machine));
  }

  private async suspendNow(vmId: string, machine: SavedMachine): Promise<SuspendRecord> {
    const h = this.vms.get(vmId);
    if (!h || h.stopping) throw new Error(`${vmId} is not running`);
    const f = this.vms.files(vmId);
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
    this.vms.setPhases(vmId, phases);
    return record;
  }

  /**
   * Starts a suspended VM from its saved memory: its processes go on where they were. Throws
   * DamagedState when the saved state cannot be used (none, another shape, damaged, refused, or the
   * guest did not answer once it ran); the saved state is gone once the guest has run.
   */
  resume(spec: VmSpec): Promise<HelloFacts> {
    return this.vms.busy(() => this.resumeNow(spec));
  }

  private async resumeNow(spec: VmSpec): Promise<HelloFacts> {
    if (this.vms.handles.has(spec.vmId)) throw new Error(`${spec.vmId} is already running`);
    const f = this.vms.files(spec.vmId);
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
      const args = await machineCommandLine(this.vms.opts, spec, f, { mode: 'resume', namedRam: record.named_ram, ramBase });
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
      const m = await spawnMachine(this.vms.opts.qemu, f, args, Math.min(this.vms.opts.bootTimeoutMs, 60_000), who);
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
        // A VM made from a snapshot wakes as the VM it was taken of: it takes an identity of its own.
        const mark = branchMarkOf(record);
        if (mark) {
          const facts = await takeBranchIdentity(m, spec, mark, phases);
          this.vms.setPhases(spec.vmId, phases);
          this.vms.track(spec.vmId, 'suspended', m, facts, m.exit);
          return facts;
        }
        const clockSet = await this.setResumedClock(m, record.facts as HelloFacts | undefined).then(
          () => true,
          (err: Error) => (this.vms.opts.log?.("setting a resumed guest's clock failed", { vm_id: spec.vmId, err: err.message }), false),
        );
        phases.clock_ms = performance.now() - t;
        // An agent that could not set the clock (an older one) still has to answer.
        const facts = clockSet && record.facts ? (record.facts as HelloFacts) : await agentRequest<HelloFacts>(m.agent, 'hello', undefined, 10_000);
        this.vms.setPhases(spec.vmId, phases);
        this.vms.track(spec.vmId, 'suspended', m, facts, m.exit);
        return facts;
      } catch (err) {
        await m.kill();
        const tail = await consoleTail(f, 5);
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
}
