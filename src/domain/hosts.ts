import type { Db, Queryable } from '../store/db.ts';
import type { Clock } from './clock.ts';

export interface HostCapacity {
  vcpus_total: number;
  memory_mib_total: number;
  disk_gib_total: number;
}

export interface HostRow extends HostCapacity {
  host_id: string;
  name: string;
  accel: string | null;
  draining: boolean;
  heartbeat_at: Date | null;
  image_id: string | null;
}

export interface Need {
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
}

/** A host that has not written a heartbeat for this long gets no new VMs (AGENTVM_HOST_STALE_S's default). */
export const HOST_STALE_MS = 30_000;
/** Network slots per host: 10.128.0.0/9 in /24s. */
const NET_SLOTS = 0x7fff;

/** VM hosts: their capacity rows, and where a new VM goes. */
export class HostService {
  /** `staleMs`: a host silent this long gets no new VMs (and, seen from an API replica, its VMs show host_unavailable). */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    readonly staleMs = HOST_STALE_MS,
  ) {}

  /** Registers (or refreshes) a host; `internal_url` is where API replicas reach it (null: not served). */
  async register(host: { host_id: string; name: string; accel: string; image_id: string | null; internal_url?: string | null } & HostCapacity): Promise<void> {
    await this.db.query(
      `INSERT INTO hosts (host_id, name, accel, vcpus_total, memory_mib_total, disk_gib_total, image_id, heartbeat_at, internal_url)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (host_id) DO UPDATE SET name = $2, accel = $3, vcpus_total = $4, memory_mib_total = $5,
         disk_gib_total = $6, image_id = coalesce($7, hosts.image_id), heartbeat_at = $8, internal_url = coalesce($9, hosts.internal_url)`,
      [host.host_id, host.name, host.accel, host.vcpus_total, host.memory_mib_total, host.disk_gib_total, host.image_id, this.clock.now(), host.internal_url ?? null],
    );
  }

  async heartbeat(hostId: string, imageId?: string | null): Promise<void> {
    await this.db.query('UPDATE hosts SET heartbeat_at = $2, image_id = coalesce($3, image_id) WHERE host_id = $1', [
      hostId,
      this.clock.now(),
      imageId ?? null,
    ]);
  }

  /**
   * Picks a live host with room for `count` VMs of `need` and locks it for the rest of the transaction,
   * so that concurrent creates cannot both take the last room. Room counts the VMs meant to run;
   * with `preemptSpot`, spot VMs count as room (the caller stops them). Answers null when none fits.
   */
  async place(tx: Queryable, need: Need, count: number, preemptSpot: boolean): Promise<{ host: HostRow; preempt: string[] } | null> {
    const stale = new Date(this.clock.now().getTime() - this.staleMs);
    const hosts = await tx.query<HostRow>(
      `SELECT * FROM hosts WHERE NOT draining AND heartbeat_at > $1 ORDER BY host_id FOR UPDATE`,
      [stale],
    );
    let best: { host: HostRow; freeMem: number; preempt: string[] } | null = null;
    for (const host of hosts) {
      const vms = await tx.query<{ vm_id: string; vcpus: number; memory_mib: number; disk_gib: number; running: boolean; spot: boolean }>(
        `SELECT vm_id, vcpus, memory_mib, disk_gib, desired_state = 'running' AS running, tier = 'spot' AS spot
         FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL AND desired_state <> 'deleted'
         ORDER BY created_at DESC`,
        [host.host_id],
      );
      const used = { vcpus: 0, memory_mib: 0, disk_gib: 0 };
      for (const v of vms) {
        used.disk_gib += v.disk_gib;
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

  /** The `count` lowest network slots free on a host (call with the host locked). */
  async freeNetSlots(tx: Queryable, hostId: string, count: number): Promise<number[]> {
    const rows = await tx.query<{ s: number }>(
      `SELECT s FROM generate_series(0, ${NET_SLOTS}) AS s
       WHERE s NOT IN (SELECT net_slot FROM vms WHERE host_id = $1 AND disks_removed_at IS NULL AND net_slot IS NOT NULL)
       ORDER BY s LIMIT $2`,
      [hostId, count],
    );
    return rows.map((r) => r.s);
  }
}
