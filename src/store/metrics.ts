/** Each VM's latest resource sample (its host writes it while the VM runs; any API replica reads it). */
import type { Queryable } from './db.ts';

export interface VmSample {
  cpu_percent: number;
  memory_used_mib: number;
  disk_used_bytes: number;
  egress_bytes_out: number;
  egress_bytes_in: number;
  sampled_at: Date;
}

/**
 * Writes a VM's sample; its egress bytes are summed from its egress log in the same statement. A
 * `disk_used_bytes` of null (the guest did not answer) keeps the last one known (0 at first).
 */
export async function saveSample(
  q: Queryable,
  vmId: string,
  s: { cpu_percent: number; memory_used_mib: number; disk_used_bytes: number | null },
  now: Date,
): Promise<void> {
  await q.query(
    `INSERT INTO vm_metrics (vm_id, cpu_percent, memory_used_mib, disk_used_bytes, egress_bytes_out, egress_bytes_in, sampled_at)
     SELECT $1, $2, $3, coalesce($4, 0), coalesce(sum(bytes_out), 0), coalesce(sum(bytes_in), 0), $5 FROM egress_log WHERE vm_id = $1
     ON CONFLICT (vm_id) DO UPDATE SET cpu_percent = EXCLUDED.cpu_percent, memory_used_mib = EXCLUDED.memory_used_mib,
       disk_used_bytes = coalesce($4, vm_metrics.disk_used_bytes), egress_bytes_out = EXCLUDED.egress_bytes_out,
       egress_bytes_in = EXCLUDED.egress_bytes_in, sampled_at = EXCLUDED.sampled_at`,
    [vmId, s.cpu_percent, s.memory_used_mib, s.disk_used_bytes, now],
  );
}

export async function latest(q: Queryable, vmId: string): Promise<VmSample | undefined> {
  const [row] = await q.query<VmSample>(
    `SELECT cpu_percent, memory_used_mib, disk_used_bytes, egress_bytes_out, egress_bytes_in, sampled_at FROM vm_metrics WHERE vm_id = $1`,
    [vmId],
  );
  return row;
}
