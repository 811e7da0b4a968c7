-- An E2B sandbox's traffic (decisions section 17): every port of the VM public, as E2B's
-- allowPublicTraffic (its default) makes them; VMs made through /v1/api keep it false.
ALTER TABLE vms ADD COLUMN ports_public boolean NOT NULL DEFAULT false;
