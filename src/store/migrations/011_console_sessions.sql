-- Web console sessions: the cookie carries a random token, only its hash is kept here. A session ends at
-- expires_at or when signed out (revoked_at); csrf_token is checked on every state change the session makes.
CREATE TABLE console_sessions (
  session_id   text PRIMARY KEY,
  tenant_id    text NOT NULL REFERENCES tenants (tenant_id),
  token_hash   text NOT NULL UNIQUE,
  csrf_token   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  revoked_at   timestamptz
);
CREATE INDEX console_sessions_tenant ON console_sessions (tenant_id, created_at DESC);
