-- One-time login codes for the CLI: only a hash is kept; single use, short-lived, counted.
CREATE TABLE login_codes (
  code_id      text PRIMARY KEY,
  tenant_id    text NOT NULL REFERENCES tenants (tenant_id),
  code_hash    text NOT NULL,
  expires_at   timestamptz NOT NULL,
  used_at      timestamptz,
  attempts     integer NOT NULL DEFAULT 0,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_codes_tenant ON login_codes (tenant_id, created_at DESC);
