import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';
import * as hostStore from '../store/hosts.ts';
import * as vmStore from '../store/vms.ts';
import * as snapshotStore from '../store/snapshots.ts';
import type { HostRegistration, HostRow } from '../store/hosts.ts';

export interface Need {
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
}

/** A host that has not written a heartbeat for this long gets no new VMs (AGENTVM_HOST_STALE_S's default). */
export const HOST_STALE_MS = 30_000;

/** VM hosts: their capacity rows, and where a new VM goes. */
export class HostService {
  /** `staleMs`: a host silent this long gets no new VMs (and, seen from an API replica, its VMs show host_unavailable). */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    readonly staleMs = HOST_STALE_MS,
  ) {}

  /** Registers (or refreshes) a host; `internal_url` is where API replicas reach it (null: not served). */
  async register(host: HostRegistration): Promise<void> {
    await hostStore.register(this.db, host, this.clock.now());
  }

  async heartbeat(hostId: string, imageId?: string | null): Promise<void> {
    await hostStore.heartbeat(this.db, hostId, imageId ?? null, this.clock.now());
  }

  /** The guest images the live hosts run, the newest heartbeat's first. */
  liveImageIds(): Promise<string[]> {
    return hostStore.liveImageIds(this.db, new Date(this.clock.now().getTime() - this.staleMs));
  }

  /**
   * Picks a live host with room for `count` VMs of `need` and locks it for the rest of the transaction,
   * so that concurrent creates cannot both take the last room. Room counts the VMs meant to run;
   * with `preemptSpot`, spot VMs count as room (the caller stops them). Answers null when none fits.
   */
  async place(tx: Queryable, need: Need, count: number, preemptSpot: boolean, onlyHost?: string): Promise<{ host: HostRow; preempt: string[] } | null> {
    const stale = new Date(this.clock.now().getTime() - this.staleMs);
    const hosts = await hostStore.lockTakingVms(tx, stale);
    let best: { host: HostRow; freeMem: number; preempt: string[] } | null = null;
    for (const host of hosts) {
      if (onlyHost !== undefined && host.host_id !== onlyHost) continue;
      const vms = await vmStore.listHoldingRoom(tx, host.host_id);
      // Snapshots kept on the host take its disk too.
      const used = { vcpus: 0, memory_mib: 0, disk_gib: await snapshotStore.hostDiskGib(tx, host.host_id) };
      for (const v of vms) {
        used.disk_gib += v.disk_gib;
        // A suspended VM holds its saved memory on the host's disk, not in its memory.
        if (v.suspended) used.disk_gib += v.memory_mib / 1024;
        if (v.running) {
          used.vcpus += v.vcpus;
          used.memory_mib += v.memory_mib;
        }
      }
      const want = { vcpus: need.vcpus * count, memory_mib: need.memory_mib * count, disk_gib: need.disk_gib * count };
      const fits = () =>
        used.vcpus + want.vcpus <= host.vcpus_total &&
        used.memory_mib + want.memory_mib <= host.memory_mib_total &&
        used.disk_gib + want.disk_gib <= host.disk_gib_total;
      const preempt: string[] = [];
      if (!fits() && preemptSpot) {
        // Newest spot VMs go first.
        for (const v of vms) {
          if (fits()) break;
          if (!v.running || !v.spot) continue;
          preempt.push(v.vm_id);
          used.vcpus -= v.vcpus;
          used.memory_mib -= v.memory_mib;
        }
      }
      if (!fits()) continue;
      const freeMem = host.memory_mib_total - used.memory_mib;
      if (!best || preempt.length < best.preempt.length || (preempt.length === best.preempt.length && freeMem > best.freeMem)) {
        best = { host, freeMem, preempt };
      }
    }
    return best && { host: best.host, preempt: best.preempt };
  }
}
