-- Lifecycle hygiene: the tenant's event feed, webhooks and their deliveries, idle stop and expiry.

-- Each tenant's events are numbered 1, 2, 3… under the lock of its counter row, in the transaction of
-- the change they report: a later number never commits before an earlier one, so a cursor misses nothing.
CREATE TABLE event_counters (
  tenant_id  text PRIMARY KEY REFERENCES tenants (tenant_id),
  last_seq   bigint NOT NULL
);

CREATE TABLE events (
  event_id    text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
  seq         bigint NOT NULL,
  type        text NOT NULL,
  data        json NOT NULL,           -- kept as written (json, not jsonb: a delivery's body is the same at every attempt); the VM, run, template, key or billing object as the API presented it then
  created_at  timestamptz NOT NULL,
  UNIQUE (tenant_id, seq)
);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE webhooks (
  webhook_id  text PRIMARY KEY,
  tenant_id   text NOT NULL REFERENCES tenants (tenant_id),
  url         text NOT NULL,
  events      text[] NOT NULL,
  secret      text NOT NULL,           -- signs deliveries (HMAC needs it whole); shown to the customer once
  created_at  timestamptz NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, created_at DESC);

-- One event to one webhook: pending until a 2xx (delivered) or 24 hours of retries (failed).
CREATE TABLE webhook_deliveries (
  delivery_id       text PRIMARY KEY,
  webhook_id        text NOT NULL REFERENCES webhooks (webhook_id) ON DELETE CASCADE,
  tenant_id         text NOT NULL,
  event_id          text NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
  status            text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts          integer NOT NULL DEFAULT 0,
  next_attempt_at   timestamptz NOT NULL,   -- also the claim: a sender moves it on before it sends
  last_attempt_at   timestamptz,
  last_status_code  integer,
  last_error        text,
  created_at        timestamptz NOT NULL,
  delivered_at      timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, created_at DESC, delivery_id DESC);

-- Idle stop and expiry. last_activity_at is touched by whatever keeps a VM busy that leaves no row of
-- its own (an open shell); runs and egress connections are read from their tables.
ALTER TABLE vms ADD COLUMN auto_stop_after_s integer CHECK (auto_stop_after_s BETWEEN 60 AND 604800);
ALTER TABLE vms ADD COLUMN expires_at timestamptz;
ALTER TABLE vms ADD COLUMN last_activity_at timestamptz;
CREATE INDEX vms_auto_stop ON vms (vm_id) WHERE auto_stop_after_s IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX vms_expires ON vms (expires_at) WHERE expires_at IS NOT NULL AND deleted_at IS NULL;

CREATE INDEX ledger_vm ON ledger (vm_id, created_at) WHERE vm_id IS NOT NULL;
CREATE INDEX runs_finished_by_vm ON runs (vm_id, finished_at);
