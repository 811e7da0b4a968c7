-- Each VM's latest resource sample, written by its host every few seconds while it runs, read by any API replica.
CREATE TABLE vm_metrics (
  vm_id            text PRIMARY KEY REFERENCES vms (vm_id) ON DELETE CASCADE,
  cpu_percent      double precision NOT NULL,   -- of the VM's vCPUs together (100 = every vCPU busy)
  memory_used_mib  integer NOT NULL,
  disk_used_bytes  bigint NOT NULL,             -- the persist disk's use, as the guest sees it
  egress_bytes_out bigint NOT NULL,             -- summed from egress_log (kept 7 days)
  egress_bytes_in  bigint NOT NULL,
  sampled_at       timestamptz NOT NULL
);
