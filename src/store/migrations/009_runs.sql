-- Runs as records: each task run in a VM, queued, running and finished, with its output as the
-- events a watcher replays (`id:` = seq). The guest keeps a running run's output until the host has
-- stored it (and acknowledged), so a restart of the server or host loses nothing.
CREATE TABLE runs (
  run_id         text PRIMARY KEY,
  tenant_id      text NOT NULL,
  vm_id          text NOT NULL REFERENCES vms (vm_id),
  -- Runs of a VM start in this order (created_at may tie).
  queue_seq      bigserial,
  status         text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'lost')),
  task           text NOT NULL,
  harness        text NOT NULL,
  model          text,
  provider       text,
  -- What the guest runs: the harness's command line and environment (placeholders, never a secret).
  argv           jsonb NOT NULL,
  env            jsonb NOT NULL,
  timeout_ms     integer NOT NULL,
  max_output_bytes integer NOT NULL,
  -- The VM's boot the run belongs to: a VM that booted again lost it.
  boots          integer NOT NULL,
  exit_code      integer,
  timed_out      boolean,
  -- The whole output once the run ended; while it runs, its events.
  stdout         text,
  stderr         text,
  last_seq       integer NOT NULL DEFAULT 0,
  status_reason  text,
  duration_ms    integer,
  -- When the guest saw the first byte of output, ms after it started the run (benchmarks).
  first_output_ms integer,
  created_at     timestamptz NOT NULL,
  started_at     timestamptz,
  finished_at    timestamptz
);
CREATE INDEX runs_by_vm ON runs (vm_id, created_at DESC, queue_seq DESC);
CREATE INDEX runs_unfinished ON runs (vm_id, queue_seq) WHERE status IN ('queued', 'running');

CREATE TABLE run_events (
  run_id  text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
  seq     integer NOT NULL,
  stream  text NOT NULL CHECK (stream IN ('stdout', 'stderr')),
  text    text NOT NULL,
  PRIMARY KEY (run_id, seq)
);
