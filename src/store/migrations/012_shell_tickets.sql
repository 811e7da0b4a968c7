-- One-use tickets for a VM's shell socket: only a hash of each is kept; a ticket is good once, until it expires.
CREATE TABLE shell_tickets (
  ticket_hash text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
  vm_id       text NOT NULL REFERENCES vms (vm_id),
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX shell_tickets_expires ON shell_tickets (expires_at);
