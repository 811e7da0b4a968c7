-- Limits and quotas (decisions section 14). Each limit has a default in code (src/domain/limits.ts);
-- a row here is the operator's override of one limit for one tenant. No row: the default.
CREATE TABLE tenant_limits (
  tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
  name        text NOT NULL CHECK (name ~ '^[a-z_]+$'),
  value       bigint NOT NULL CHECK (value >= 0),
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, name)
);

-- Open event streams and shells, counted across every replica: a stream holds a lease while it is
-- open (renewed every 20 s, ended when it closes); a lease of a process that went away runs out by
-- itself. A shell's lease is taken with its ticket (it runs out with the ticket if never used).
CREATE TABLE stream_leases (
  lease_id    text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
  kind        text NOT NULL CHECK (kind IN ('events', 'shell')),
  created_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL
);
CREATE INDEX stream_leases_tenant ON stream_leases (tenant_id, expires_at);
