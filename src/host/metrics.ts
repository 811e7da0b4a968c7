/**
 * The host's sampler: every 5 s each VM running here is sampled and its latest sample written to
 * `vm_metrics`, where any API replica reads it.
 *
 * - CPU: utime + stime of the VM's QEMU process (/proc/<pid>/stat) over the wall time since the last
 *   sample, as a percent of the VM's vCPUs together (100: every vCPU busy). The first sample of a
 *   QEMU covers its life so far.
 * - Memory: MemTotal − MemAvailable of the guest (/proc/meminfo, read by the guest agent's `stats`);
 *   when the guest does not answer, the QEMU process's proportional set size (/proc/<pid>/smaps_rollup).
 * - Disk: used blocks of /persist (statfs in the guest, as `df` counts them); when the guest does not
 *   answer, the last value is kept. An agent without `stats` is asked through a shell script instead.
 * - A quiet VM is not woken for them: while its QEMU has used less than QUIET_CPU_FRACTION of a core a
 *   vCPU since the guest last answered, and that answer is under a minute old (guestMaxAgeMs), its memory and
 *   disk figures stand (a guest that does nothing changes neither). Under emulation each question
 *   costs an idle guest about 19 ms of CPU, and it was most of what 25 idle VMs cost a 2-core host.
 * - Egress: summed from the VM's egress log when the sample is written.
 */
import { setMaxListeners } from 'node:events';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../store/db.ts';
import type { Clock } from '../domain/clock.ts';
import type { Logger } from '../log.ts';
import { PeriodicJob } from '../jobs/periodic.ts';
import type { QemuDriver } from '../vmm/qemu.ts';
import * as hostVmStore from '../store/vmsOnHost.ts';
import * as metricsStore from '../store/metrics.ts';

/** Kernel clock ticks per second (USER_HZ): 100 on every Linux architecture QEMU runs on here. */
const TICKS_PER_S = 100;

/** Below this share of a core a vCPU since the guest's last figures, a VM is quiet (idle: about 2%). */
const QUIET_CPU_FRACTION = 0.05;

/** utime + stime (ticks) and start time (ticks after boot) of a process, from /proc/<pid>/stat. */
export async function processTimes(pid: number): Promise<{ cpuTicks: number; startTicks: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces and parentheses) start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { cpuTicks: Number(fields[11]) + Number(fields[12]), startTicks: Number(fields[19]) };
}

/** Proportional set size of a process in MiB. */
export async function processPssMib(pid: number): Promise<number> {
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
  return Math.round(kib / 1024);
}

/** What the guest says: memory in use (MiB) and persist-disk bytes used, from one exec. */
export function parseGuestReport(stdout: string): { memoryUsedMib: number | null; diskUsedBytes: number | null } {
  const total = /^MemTotal:\s+(\d+) kB/m.exec(stdout)?.[1];
  const available = /^MemAvailable:\s+(\d+) kB/m.exec(stdout)?.[1];
  // `df -P -B1`: filesystem, size, used, available, capacity, mount point.
  const disk = /^DISK \S+ \d+ (\d+) /m.exec(stdout)?.[1];
  return {
    memoryUsedMib: total && available ? Math.round((Number(total) - Number(available)) / 1024) : null,
    diskUsedBytes: disk ? Number(disk) : null,
  };
}

const GUEST_SCRIPT = 'cat /proc/meminfo; echo DISK $(df -P -B1 /persist | tail -n 1)';

export interface MetricsSamplerOptions {
  db: Db;
  clock: Clock;
  driver: QemuDriver;
  hostId: string;
  log: Logger;
  intervalMs?: number;
  /** A quiet VM's guest is asked again after this long all the same (60 s). */
  guestMaxAgeMs?: number;
}

export class MetricsSampler extends PeriodicJob {
  /** The last CPU reading of each VM's QEMU: its pid, ticks and when (ms). */
  private readonly last = new Map<string, { pid: number; cpuTicks: number; atMs: number }>();
  /** The guest's last figures for each VM, and its QEMU's ticks and the time (ms) when they were asked for. */
  private readonly guestLast = new Map<string, { pid: number; cpuTicks: number; atMs: number; memoryUsedMib: number; diskUsedBytes: number | null }>();
  /** Ends the waits of a pass under way (stop). */
  private readonly stopping = new AbortController();

  constructor(private readonly o: MetricsSamplerOptions) {
    super(o, 'sampling VMs failed');
    // Every VM's wait in a pass listens on it: more than the ten past which Node warns.
    setMaxListeners(0, this.stopping.signal);
  }

  override async stop(): Promise<void> {
    this.stopping.abort();
    await super.stop();
  }

  /**
   * Samples every running VM, spread over most of the interval rather than all at once: a sample wakes
   * its guest (under emulation 10–30 ms of its CPU), and 25 guests woken together every 5 s held a
   * 2-core host for most of a second; a VM's first run that fell there took about 1 s, not 0.3.
   */
  protected async pass(): Promise<void> {
    const rows = await hostVmStore.listStatesOnHost(this.o.db, this.o.hostId);
    const running = rows.filter((r) => r.status === 'running' && this.o.driver.isRunning(r.vm_id));
    const here = new Set(running.map((r) => r.vm_id));
    for (const vmId of this.last.keys()) if (!here.has(vmId)) this.last.delete(vmId);
    for (const vmId of this.guestLast.keys()) if (!here.has(vmId)) this.guestLast.delete(vmId);
    const spacingMs = ((this.o.intervalMs ?? 5000) * 0.8) / Math.max(1, running.length);
    await Promise.all(
      running.map((r, i) =>
        sleep(i * spacingMs, undefined, { signal: this.stopping.signal })
          .then(
            () => this.sample(r.vm_id, r.vcpus),
            () => undefined, // stopping: the rest of the pass is skipped
          )
          .catch((err) => {
            // A VM stopped or destroyed while it was being sampled (its QEMU's /proc files gone) is no fault.
            if (this.o.driver.isRunning(r.vm_id)) this.o.log.warn({ err, vm_id: r.vm_id }, 'sampling a VM failed');
          }),
      ),
    );
  }

  /** Samples one VM and writes it. */
  async sample(vmId: string, vcpus: number): Promise<void> {
    const { driver } = this.o;
    const pid = driver.pidOf(vmId);
    if (!pid) return;
    const times = await processTimes(pid);
    const nowMs = Date.now();
    const known = this.guestLast.get(vmId);
    const quiet =
      known !== undefined &&
      known.pid === pid &&
      nowMs - known.atMs < (this.o.guestMaxAgeMs ?? 60_000) &&
      (times.cpuTicks - known.cpuTicks) / TICKS_PER_S < (QUIET_CPU_FRACTION * Math.max(1, vcpus) * (nowMs - known.atMs)) / 1000;
    // The agent reads its figures without starting a process (a process a VM every few seconds costs a
    // guest under emulation real CPU and memory); an older agent runs the script.
    const guest = quiet
      ? Promise.resolve({ memoryUsedMib: known.memoryUsedMib, diskUsedBytes: known.diskUsedBytes })
      : driver
          .request<{ mem_total_kib: number; mem_available_kib: number; disk_used_bytes: number | null }>(vmId, 'stats', undefined, 4000)
          .then(
            (r) => ({
              memoryUsedMib: Number.isFinite(r.mem_total_kib) && Number.isFinite(r.mem_available_kib) ? Math.round((r.mem_total_kib - r.mem_available_kib) / 1024) : null,
              diskUsedBytes: r.disk_used_bytes,
            }),
            () =>
              driver
                .exec(vmId, { argv: ['sh', '-c', GUEST_SCRIPT], timeout_ms: 3000, max_output_bytes: 16_384 }, 4000)
                .then((r) => parseGuestReport(r.stdout), () => ({ memoryUsedMib: null, diskUsedBytes: null })),
          );
    const prev = this.last.get(vmId);
    let busyS: number;
    let wallS: number;
    if (prev && prev.pid === pid) {
      busyS = (times.cpuTicks - prev.cpuTicks) / TICKS_PER_S;
      wallS = (nowMs - prev.atMs) / 1000;
    } else {
      // A QEMU seen for the first time: its life so far.
      const uptimeS = Number((await readFile('/proc/uptime', 'utf8')).split(' ')[0]);
      busyS = times.cpuTicks / TICKS_PER_S;
      wallS = uptimeS - times.startTicks / TICKS_PER_S;
    }
    this.last.set(vmId, { pid, cpuTicks: times.cpuTicks, atMs: nowMs });
    const cpu = wallS > 0 ? Math.min(100, Math.max(0, (busyS / wallS / Math.max(1, vcpus)) * 100)) : 0;
    const report = await guest;
    if (!quiet && report.memoryUsedMib !== null) this.guestLast.set(vmId, { pid, cpuTicks: times.cpuTicks, atMs: nowMs, memoryUsedMib: report.memoryUsedMib, diskUsedBytes: report.diskUsedBytes });
    const memoryUsedMib = report.memoryUsedMib ?? (await processPssMib(pid));
    await metricsStore.saveSample(
      this.o.db,
      vmId,
      { cpu_percent: Math.round(cpu * 10) / 10, memory_used_mib: memoryUsedMib, disk_used_bytes: report.diskUsedBytes },
      this.o.clock.now(),
    );
  }
}
