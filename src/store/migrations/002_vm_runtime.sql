-- What running real VMs needs: a private network per VM on its host, the metering remainder,
-- disk clean-up after destroy, and hosts that say how they run VMs.

ALTER TABLE vms ADD COLUMN net_slot integer;
ALTER TABLE vms ADD COLUMN unbilled_ms bigint NOT NULL DEFAULT 0;   -- tier VMs: running time not yet drawn (under one cent)
ALTER TABLE vms ADD COLUMN booted_at timestamptz;
ALTER TABLE vms ADD COLUMN boots integer NOT NULL DEFAULT 0;
ALTER TABLE vms ADD COLUMN disks_removed_at timestamptz;            -- destroy: set once the host removed the disks
CREATE UNIQUE INDEX vms_host_net_slot ON vms (host_id, net_slot) WHERE disks_removed_at IS NULL AND net_slot IS NOT NULL;
CREATE INDEX vms_host_work ON vms (host_id) WHERE disks_removed_at IS NULL;

ALTER TABLE hosts ADD COLUMN image_id text;                          -- the guest image new VMs on this host get
