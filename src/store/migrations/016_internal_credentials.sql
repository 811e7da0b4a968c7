-- The internal endpoint between API replicas and VM hosts: each process has a credential of its own,
-- issued when it registers (at its start), only its SHA-256 kept here. A holder has at most one live
-- credential; the operator revokes it (revoked_at), and its next start issues a new one.
CREATE TABLE internal_credentials (
  credential_id  text PRIMARY KEY,
  holder_kind    text NOT NULL CHECK (holder_kind IN ('host', 'replica')),
  holder_id      text NOT NULL,
  secret_hash    text NOT NULL UNIQUE,
  created_at     timestamptz NOT NULL,
  revoked_at     timestamptz
);
CREATE UNIQUE INDEX internal_credentials_live ON internal_credentials (holder_kind, holder_id) WHERE revoked_at IS NULL;

-- Sign-in by code, counted per email whether or not it has an account (so that the answers cannot tell
-- them apart): codes sent (5 per 15 minutes) and wrong codes (10 per hour). The email is kept as its hash;
-- rows older than an hour are pruned as new ones come.
CREATE TABLE login_attempts (
  email_hash  text NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('code_sent', 'wrong_code')),
  at          timestamptz NOT NULL
);
CREATE INDEX login_attempts_email ON login_attempts (email_hash, kind, at DESC);
CREATE INDEX login_attempts_at ON login_attempts (at);
