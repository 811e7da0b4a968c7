-- A host's last loss, as its own restart recorded it: from its last heartbeat before it was lost to its
-- return. Its tier VMs are not metered for that window (operators read it; tests check metering on it).
ALTER TABLE hosts ADD COLUMN lost_from timestamptz;
ALTER TABLE hosts ADD COLUMN lost_until timestamptz;
