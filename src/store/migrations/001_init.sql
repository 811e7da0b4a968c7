-- agentvm schema, version 1. One dialect for PGlite and PostgreSQL.

CREATE TABLE tenants (
  tenant_id        text PRIMARY KEY,
  email            text NOT NULL UNIQUE,
  card_brand       text,
  card_last4       text CHECK (card_last4 ~ '^[0-9]{4}$'),
  card_updated_at  timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  key_id        text PRIMARY KEY,
  tenant_id     text NOT NULL REFERENCES tenants (tenant_id),
  key_hash      text NOT NULL UNIQUE,          -- hex SHA-256 of the plaintext; the plaintext is never stored
  prefix        text NOT NULL,
  label         text,
  scope         text NOT NULL CHECK (scope IN ('read', 'readwrite')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at DESC);

-- A machine that runs VMs. Capacity is what the host offers; placement sums the VMs on it.
CREATE TABLE hosts (
  host_id           text PRIMARY KEY,
  name              text NOT NULL,
  address           text,
  accel             text,
  vcpus_total       integer NOT NULL,
  memory_mib_total  integer NOT NULL,
  disk_gib_total    integer NOT NULL,
  draining          boolean NOT NULL DEFAULT false,
  heartbeat_at      timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now()
);

-- A VM: what the customer asked for (desired_*) beside what the platform observed (status).
CREATE TABLE vms (
  vm_id               text PRIMARY KEY,
  tenant_id           text NOT NULL REFERENCES tenants (tenant_id),
  host_id             text REFERENCES hosts (host_id),
  plan                text CHECK (plan IN ('starter', 'pro', 'max')),
  cycle               text CHECK (cycle IN ('monthly', 'annual')),
  tier                text CHECK (tier IN ('ondemand', 'spot')),
  harness             text NOT NULL,
  template_id         text,
  vcpus               integer NOT NULL,
  memory_mib          integer NOT NULL,
  disk_gib            integer NOT NULL,
  status              text NOT NULL CHECK (status IN ('provisioning', 'running', 'stopping', 'stopped', 'starting',
                                                       'restarting', 'reprovisioning', 'failed', 'deleted')),
  status_reason       text,
  desired_state       text NOT NULL CHECK (desired_state IN ('running', 'stopped', 'deleted')),
  -- Restart and reprovision are requests counted up by the API and acknowledged by the reconciler.
  restart_requested       integer NOT NULL DEFAULT 0,
  restart_done            integer NOT NULL DEFAULT 0,
  reprovision_requested   integer NOT NULL DEFAULT 0,
  reprovision_done        integer NOT NULL DEFAULT 0,
  image_id            text,
  ipv4                text,
  secret_names        text[] NOT NULL DEFAULT '{}',
  lease_owner         text,
  lease_expires_at    timestamptz,
  metered_until       timestamptz,               -- tier VMs: running time up to here has been drawn from credits
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  deleted_at          timestamptz,
  CHECK ((plan IS NULL) <> (tier IS NULL)),
  CHECK ((plan IS NULL) = (cycle IS NULL))
);
CREATE INDEX vms_tenant ON vms (tenant_id, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX vms_host ON vms (host_id) WHERE deleted_at IS NULL;

-- array_to_string is only STABLE; tags are plain text, so this wrapper is safe to mark IMMUTABLE.
CREATE FUNCTION template_search_vector(name text, description text, tags text[]) RETURNS tsvector
  LANGUAGE sql IMMUTABLE AS $$
  SELECT to_tsvector('english'::regconfig, name || ' ' || description || ' ' || array_to_string(tags, ' '))
$$;

CREATE TABLE templates (
  template_id     text PRIMARY KEY,
  tenant_id       text REFERENCES tenants (tenant_id),   -- NULL for the platform's starter templates
  slug            text NOT NULL CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$'),
  name            text NOT NULL,
  description     text NOT NULL DEFAULT '',
  harness         text NOT NULL,
  plan            text CHECK (plan IN ('starter', 'pro', 'max')),
  visibility      text NOT NULL CHECK (visibility IN ('public', 'private')),
  tags            text[] NOT NULL DEFAULT '{}',
  forks           integer NOT NULL DEFAULT 0,
  stars           integer NOT NULL DEFAULT 0,
  size_bytes      bigint NOT NULL DEFAULT 0,
  status          text NOT NULL CHECK (status IN ('capturing', 'ready', 'failed')),
  status_reason   text,
  source_vm_id    text,
  image_path      text,
  scrub_report    jsonb,
  search          tsvector GENERATED ALWAYS AS (template_search_vector(name, description, tags)) STORED,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX templates_owner_slug ON templates (coalesce(tenant_id, ''), slug);
CREATE UNIQUE INDEX templates_public_slug ON templates (slug) WHERE visibility = 'public';
CREATE INDEX templates_search ON templates USING gin (search);
CREATE INDEX templates_public_new ON templates (created_at DESC) WHERE visibility = 'public';

-- Money. Append-only: a correction is a new row, never an edit.
CREATE TABLE ledger (
  entry_id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id            text NOT NULL REFERENCES tenants (tenant_id),
  kind                 text NOT NULL CHECK (kind IN ('card_charge', 'credit_purchase', 'credit_draw')),
  amount_cents         bigint NOT NULL CHECK (amount_cents >= 0),
  credits_delta_cents  bigint NOT NULL,        -- the entry's effect on the prepaid balance
  vm_id                text,
  template_id          text,
  plan                 text,
  cycle                text,
  description          text NOT NULL,
  provider_reference   text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  CHECK (kind <> 'card_charge' OR credits_delta_cents = 0),
  CHECK (kind <> 'credit_purchase' OR credits_delta_cents = amount_cents),
  CHECK (kind <> 'credit_draw' OR credits_delta_cents = -amount_cents)
);
CREATE INDEX ledger_tenant ON ledger (tenant_id, created_at);

CREATE FUNCTION ledger_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger rows are append-only';
END;
$$;
CREATE TRIGGER ledger_no_update BEFORE UPDATE OR DELETE ON ledger
  FOR EACH ROW EXECUTE FUNCTION ledger_is_append_only();

-- Replays of money POSTs: the first response for (tenant, key) is kept and returned again.
CREATE TABLE idempotency_keys (
  tenant_id      text NOT NULL REFERENCES tenants (tenant_id),
  idem_key       text NOT NULL,
  operation      text NOT NULL,
  request_hash   text NOT NULL,
  status_code    integer,
  response       jsonb,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, idem_key)
);
