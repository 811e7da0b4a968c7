/**
 * The `runs` and `run_events` tables: a run of a task in a VM, and its output as numbered events.
 * A customer's read carries the tenant and VM in its WHERE; the host's writes go by run id.
 */
import type { Queryable } from './db.ts';
import type { RunChunk } from '../wire/protocol.ts';

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'lost';
export const UNFINISHED: RunStatus[] = ['queued', 'running'];
export const isFinished = (status: RunStatus) => !UNFINISHED.includes(status);

/** A run as the customer sees it; `stdout`/`stderr` so far while it runs. */
export interface RunRow {
  run_id: string;
  vm_id: string;
  status: RunStatus;
  task: string;
  harness: string;
  model: string | null;
  provider: string | null;
  exit_code: number | null;
  stdout: string | null;
  stderr: string | null;
  timed_out: boolean | null;
  duration_ms: number | null;
  status_reason: string | null;
  last_seq: number;
  first_output_ms: number | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

/** What the VM's host needs to start a run in its guest and follow it. */
export interface RunWork {
  run_id: string;
  vm_id: string;
  status: RunStatus;
  boots: number;
  last_seq: number;
  argv: string[];
  env: Record<string, string>;
  timeout_ms: number;
  max_output_bytes: number;
}

export interface NewRun {
  run_id: string;
  tenant_id: string;
  vm_id: string;
  task: string;
  harness: string;
  model: string | null;
  provider: string | null;
  argv: string[];
  env: Record<string, string>;
  timeout_ms: number;
  max_output_bytes: number;
  boots: number;
  created_at: Date;
}

export interface RunEventRow extends RunChunk {}

/** A stream's text: the finished run's, or the events so far. */
const streamText = (stream: 'stdout' | 'stderr') => `CASE WHEN r.status = 'queued' THEN NULL
  WHEN r.${stream} IS NOT NULL THEN r.${stream}
  ELSE (SELECT coalesce(string_agg(e.text, '' ORDER BY e.seq), '') FROM run_events e WHERE e.run_id = r.run_id AND e.stream = '${stream}') END`;

const RUN_COLUMNS = `r.run_id, r.vm_id, r.status, r.task, r.harness, r.model, r.provider, r.exit_code,
  ${streamText('stdout')} AS stdout, ${streamText('stderr')} AS stderr,
  r.timed_out, r.duration_ms, r.status_reason, r.last_seq, r.first_output_ms, r.created_at, r.started_at, r.finished_at`;

export async function insert(q: Queryable, r: NewRun): Promise<void> {
  await q.query(
    `INSERT INTO runs (run_id, tenant_id, vm_id, status, task, harness, model, provider, argv, env, timeout_ms, max_output_bytes, boots, created_at)
     VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [r.run_id, r.tenant_id, r.vm_id, r.task, r.harness, r.model, r.provider, JSON.stringify(r.argv), JSON.stringify(r.env), r.timeout_ms, r.max_output_bytes, r.boots, r.created_at],
  );
}

/** Locks the VM's row (runs are queued one after another) and answers its state and how many runs wait. */
export async function lockQueue(q: Queryable, vmId: string): Promise<{ status: string; boots: number; queued: number }> {
  const [row] = await q.query<{ status: string; boots: number; queued: number }>(
    `SELECT status, boots, (SELECT count(*)::int FROM runs WHERE vm_id = $1 AND status = 'queued') AS queued FROM vms WHERE vm_id = $1 FOR UPDATE`,
    [vmId],
  );
  return row;
}

export async function get(q: Queryable, tenantId: string, vmId: string, runId: string): Promise<RunRow | null> {
  const [row] = await q.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs r WHERE r.run_id = $1 AND r.vm_id = $2 AND r.tenant_id = $3`, [runId, vmId, tenantId]);
  return row ?? null;
}

export async function byId(q: Queryable, runId: string): Promise<RunRow | null> {
  const [row] = await q.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs r WHERE r.run_id = $1`, [runId]);
  return row ?? null;
}

/** A VM's runs, newest first. */
export async function list(q: Queryable, tenantId: string, vmId: string, limit: number, offset: number): Promise<{ rows: RunRow[]; total: number }> {
  const [rows, [count]] = await Promise.all([
    q.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM runs r WHERE r.vm_id = $1 AND r.tenant_id = $2 ORDER BY r.created_at DESC, r.queue_seq DESC LIMIT $3 OFFSET $4`,
      [vmId, tenantId, limit, offset],
    ),
    q.query<{ n: number }>(`SELECT count(*)::int AS n FROM runs WHERE vm_id = $1 AND tenant_id = $2`, [vmId, tenantId]),
  ]);
  return { rows, total: count.n };
}

export function eventsAfter(q: Queryable, runId: string, after: number, limit: number): Promise<RunEventRow[]> {
  return q.query<RunEventRow>(`SELECT seq, stream, text FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [runId, after, limit]);
}

/**
 * Stores chunks that follow the run's last stored one, in one statement (atomic without a
 * transaction of its own: the output path is the latency a watcher sees).
 */
export async function appendEvents(q: Queryable, runId: string, chunks: RunChunk[], lastSeq = chunks[chunks.length - 1].seq): Promise<void> {
  if (!chunks.length) {
    // Chunks the host dropped whole (past the output cap): their numbers are taken all the same.
    await q.query('UPDATE runs SET last_seq = $2 WHERE run_id = $1 AND last_seq < $2', [runId, lastSeq]);
    return;
  }
  const values: unknown[] = [runId, lastSeq];
  const tuples = chunks.map((c, i) => {
    values.push(c.seq, c.stream, c.text);
    return `($1, $${i * 3 + 3}::int, $${i * 3 + 4}, $${i * 3 + 5})`;
  });
  await q.query(
    `WITH stored AS (INSERT INTO run_events (run_id, seq, stream, text) VALUES ${tuples.join(', ')} ON CONFLICT DO NOTHING)
     UPDATE runs SET last_seq = $2 WHERE run_id = $1 AND last_seq < $2`,
    values,
  );
}

/** The characters of each stream of a run stored so far (what its output cap has taken). */
export async function storedChars(q: Queryable, runId: string): Promise<{ stdout: number; stderr: number }> {
  const rows = await q.query<{ stream: 'stdout' | 'stderr'; chars: string | number }>(
    'SELECT stream, coalesce(sum(char_length(text)), 0) AS chars FROM run_events WHERE run_id = $1 GROUP BY stream',
    [runId],
  );
  const out = { stdout: 0, stderr: 0 };
  for (const r of rows) out[r.stream] = Number(r.chars);
  return out;
}

/** Every unfinished run of the VMs a host has, oldest first. */
export function unfinishedOnHost(q: Queryable, hostId: string): Promise<RunWork[]> {
  return q.query<RunWork>(
    `SELECT r.run_id, r.vm_id, r.status, r.boots, r.last_seq, r.argv, r.env, r.timeout_ms, r.max_output_bytes
     FROM runs r JOIN vms v ON v.vm_id = r.vm_id
     WHERE r.status IN ('queued', 'running') AND v.host_id = $1 ORDER BY r.queue_seq`,
    [hostId],
  );
}

/** A VM's unfinished runs, oldest first, each with the VM's state now. */
export function unfinishedOfVm(q: Queryable, vmId: string): Promise<Array<RunWork & { vm_status: string; vm_boots: number; host_id: string | null }>> {
  return q.query(
    `SELECT r.run_id, r.vm_id, r.status, r.boots, r.last_seq, r.argv, r.env, r.timeout_ms, r.max_output_bytes,
       v.status AS vm_status, v.boots AS vm_boots, v.host_id
     FROM runs r JOIN vms v ON v.vm_id = r.vm_id
     WHERE r.status IN ('queued', 'running') AND r.vm_id = $1 ORDER BY r.queue_seq`,
    [vmId],
  );
}

export async function markRunning(q: Queryable, runId: string, at: Date): Promise<boolean> {
  const rows = await q.query(`UPDATE runs SET status = 'running', started_at = $2 WHERE run_id = $1 AND status = 'queued' RETURNING run_id`, [runId, at]);
  return rows.length > 0;
}

export interface RunEnding {
  status: RunStatus;
  exit_code: number | null;
  timed_out: boolean | null;
  duration_ms: number | null;
  first_output_ms: number | null;
  status_reason: string | null;
  finished_at: Date;
}

/** Ends an unfinished run, its output joined from its events; false when it had ended already. */
export async function finish(q: Queryable, runId: string, e: RunEnding): Promise<boolean> {
  const rows = await q.query(
    `UPDATE runs r SET status = $2, exit_code = $3, timed_out = $4, first_output_ms = $6, status_reason = $7, finished_at = $8,
       duration_ms = coalesce($5, CASE WHEN r.started_at IS NULL THEN NULL ELSE (extract(epoch FROM ($8::timestamptz - r.started_at)) * 1000)::int END),
       stdout = (SELECT coalesce(string_agg(text, '' ORDER BY seq), '') FROM run_events WHERE run_id = r.run_id AND stream = 'stdout'),
       stderr = (SELECT coalesce(string_agg(text, '' ORDER BY seq), '') FROM run_events WHERE run_id = r.run_id AND stream = 'stderr')
     WHERE r.run_id = $1 AND r.status IN ('queued', 'running') RETURNING r.run_id`,
    [runId, e.status, e.exit_code, e.timed_out, e.duration_ms, e.first_output_ms, e.status_reason, e.finished_at],
  );
  return rows.length > 0;
}

/** A queued run of the tenant's is cancelled (it never started); false when it was not queued. */
export async function cancelQueued(q: Queryable, tenantId: string, runId: string, at: Date): Promise<boolean> {
  const rows = await q.query(
    `UPDATE runs SET status = 'cancelled', finished_at = $3, stdout = '', stderr = '', status_reason = 'cancelled before it started'
     WHERE run_id = $1 AND tenant_id = $2 AND status = 'queued' RETURNING run_id`,
    [runId, tenantId, at],
  );
  return rows.length > 0;
}

/** A destroyed VM's runs go with it (their events too). */
export async function deleteOfVm(q: Queryable, vmId: string): Promise<void> {
  await q.query('DELETE FROM runs WHERE vm_id = $1', [vmId]);
}
