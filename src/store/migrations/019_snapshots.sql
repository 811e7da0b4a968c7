-- Snapshots of running VMs (decisions section 18): memory, devices and disks saved on the VM's host,
-- resources of their own that outlive their VM. A branch makes one of kind `branch` (not listed: it
-- lives until the VMs it starts have taken their own links to its files).
CREATE TABLE snapshots (
  snapshot_id text PRIMARY KEY,
  tenant_id text NOT NULL REFERENCES tenants(tenant_id),
  vm_id text NOT NULL,
  host_id text NOT NULL,
  name text NOT NULL,
  kind text NOT NULL DEFAULT 'snapshot',
  status text NOT NULL,
  status_reason text,
  size_bytes bigint NOT NULL DEFAULT 0,
  paused_ms integer,
  -- The machine it saved: what a VM started from it is.
  vcpus integer NOT NULL,
  memory_mib integer NOT NULL,
  disk_gib integer NOT NULL,
  harness text NOT NULL,
  image_id text,
  root_image_id text,
  template_id text,
  egress jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  ready_at timestamptz,
  deleted_at timestamptz
);
CREATE INDEX snapshots_tenant ON snapshots (tenant_id, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX snapshots_host ON snapshots (host_id) WHERE deleted_at IS NULL;

-- The snapshot a VM started from (its first start resumes that memory).
ALTER TABLE vms ADD COLUMN snapshot_id text;
