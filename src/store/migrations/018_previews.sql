-- Preview URLs (decisions section 16): each VM's preview token (its hash only), the ports of a VM that
-- anyone may reach without a credential, and whether a request to a suspended VM starts it.
CREATE TABLE vm_preview_tokens (
  vm_id text PRIMARY KEY REFERENCES vms(vm_id) ON DELETE CASCADE,
  token_hash text NOT NULL,
  created_at timestamptz NOT NULL
);

CREATE TABLE vm_public_ports (
  vm_id text NOT NULL REFERENCES vms(vm_id) ON DELETE CASCADE,
  port integer NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (vm_id, port)
);

ALTER TABLE vms ADD COLUMN auto_resume boolean NOT NULL DEFAULT false;

-- A preview's Host names the VM by its label: its id lowercased, `_` as `-`.
CREATE INDEX vms_preview_label ON vms (lower(replace(vm_id, '_', '-'))) WHERE deleted_at IS NULL;
