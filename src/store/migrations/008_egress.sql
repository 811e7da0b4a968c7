-- Egress: each VM's policy, the names of its brokered secrets (kept sealed here, never in its guest),
-- and the log of its connections through the gateway (kept 7 days).
ALTER TABLE vms ADD COLUMN egress jsonb;
-- VMs made before the gateway had no network at all: they get their harness's provider hosts.
UPDATE vms SET egress = jsonb_build_object('mode', 'allowlist', 'allow', CASE harness
    WHEN 'claude-code' THEN '["api.anthropic.com"]'::jsonb
    WHEN 'codex' THEN '["api.openai.com"]'::jsonb
    WHEN 'gemini-cli' THEN '["generativelanguage.googleapis.com"]'::jsonb
    WHEN 'echo' THEN '[]'::jsonb
    ELSE '["api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"]'::jsonb END);
ALTER TABLE vms ALTER COLUMN egress SET NOT NULL;
-- A row written without a policy reaches nothing (the API always writes one).
ALTER TABLE vms ALTER COLUMN egress SET DEFAULT '{"mode": "allowlist", "allow": []}';
ALTER TABLE vms ADD COLUMN brokered_secret_names text[] NOT NULL DEFAULT '{}';

CREATE TABLE vm_brokered_secrets (
  vm_id   text NOT NULL REFERENCES vms (vm_id),
  name    text NOT NULL,
  sealed  text NOT NULL,
  PRIMARY KEY (vm_id, name)
);

CREATE TABLE egress_log (
  id         bigserial PRIMARY KEY,
  vm_id      text NOT NULL,
  at         timestamptz NOT NULL,
  host       text NOT NULL,
  port       integer NOT NULL,
  decision   text NOT NULL CHECK (decision IN ('allowed', 'denied')),
  reason     text NOT NULL,
  bytes_out  bigint NOT NULL DEFAULT 0,
  bytes_in   bigint NOT NULL DEFAULT 0
);
CREATE INDEX egress_log_vm ON egress_log (vm_id, at DESC, id DESC);
CREATE INDEX egress_log_at ON egress_log (at);
