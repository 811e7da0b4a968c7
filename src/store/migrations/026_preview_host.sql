-- The Host header a VM's apps get through its previews (decisions section 17: E2B's
-- network.maskRequestHost, `${PORT}` standing for the port); null: the Host the client sent.
ALTER TABLE vms ADD COLUMN preview_host text;
