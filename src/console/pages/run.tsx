import { call, type Schemas } from '../api.ts';
import type { ConsoleApp } from '../app.tsx';
import { noticeFor, RunStatus, Time, vmPath } from '../components.tsx';
import { duration } from '../format.ts';
import { Csrf, page } from '../layout.tsx';
import { SECURITY_HEADERS } from '../security.ts';

/** A run's page, its event stream as the browser follows it, and cancelling it. */
export function registerRun(app: ConsoleApp) {
  // A run: its task, its output streaming as it comes, and a cancel button while it is unfinished.
  app.get('/vms/:id/runs/:run_id', async (c) => {
    const api = c.get('api');
    const session = c.get('session');
    const { id, run_id: runId } = c.req.param() as { id: string; run_id: string };
    const run = await call(api.GET('/v1/api/vms/{id}/runs/{run_id}', { params: { path: { id, run_id: runId } } }));
    const finished = run.finished_at !== null;
    return page(
      c,
      {
        title: 'Run',
        section: 'vms',
        session,
        kind: 'run',
        crumbs: [{ href: '/console/vms', label: 'VMs' }, { href: vmPath(id), label: id }],
        notice: noticeFor(c.req.query('done')),
      },
      <div class="stack">
        <section class="card stack" aria-labelledby="run-task-h">
          <div class="section-head">
            <h2 id="run-task-h">Task</h2>
            <div class="button-row">
              <span id="run-status" aria-live="polite">
                <RunStatus run={run} />
              </span>
              {!finished ? (
                <form method="post" action={`${vmPath(id)}/runs/${run.run_id}/cancel`} class="inline" id="run-cancel">
                  <Csrf session={session} />
                  <button type="submit" class="button small ghost">
                    Cancel run
                  </button>
                </form>
              ) : null}
            </div>
          </div>
          <pre class="task-text">{run.task}</pre>
          <dl class="facts grid-facts">
            <dt>Harness</dt>
            <dd>{run.harness}</dd>
            <dt>Exit code</dt>
            <dd id="run-exit">{run.exit_code ?? '—'}</dd>
            <dt>Took</dt>
            <dd id="run-duration">{duration(run.duration_ms)}</dd>
            <dt>Started</dt>
            <dd>
              <Time at={run.started_at ?? run.created_at} />
            </dd>
          </dl>
        </section>
        <section class="card stack" aria-labelledby="run-output-h">
          <div class="section-head">
            <h2 id="run-output-h">Output</h2>
            {!finished ? (
              <span class="muted small" id="run-progress">
                <span class="spinner" aria-hidden="true"></span> streaming as it comes…
              </span>
            ) : null}
          </div>
          <pre
            id="run-output"
            class="output"
            tabindex={0}
            aria-label="Run output"
            aria-live="off"
            data-stream={finished ? undefined : `${vmPath(id)}/runs/${run.run_id}/events`}
          >
            {finished ? <RunText run={run} /> : null}
          </pre>
        </section>
      </div>,
    );
  });

  // The run's event stream, from the API's own operation, so that the browser follows it as the CLI does.
  app.get('/vms/:id/runs/:run_id/events', async (c) => {
    const { id, run_id: runId } = c.req.param() as { id: string; run_id: string };
    const headers: Record<string, string> = {};
    const last = c.req.header('last-event-id');
    if (last) headers['Last-Event-ID'] = last;
    const res = await c.get('api').GET('/v1/api/vms/{id}/runs/{run_id}/events', { params: { path: { id, run_id: runId } }, headers, parseAs: 'stream' });
    if (!res.response.ok || !res.response.body) return c.body(null, res.response.status as 404);
    return new Response(res.response.body, {
      status: 200,
      headers: { ...SECURITY_HEADERS, 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' },
    });
  });

  app.post('/vms/:id/runs/:run_id/cancel', async (c) => {
    const { id, run_id: runId } = c.req.param() as { id: string; run_id: string };
    await call(c.get('api').POST('/v1/api/vms/{id}/runs/{run_id}/cancel', { params: { path: { id, run_id: runId } } }));
    return c.redirect(`${vmPath(id)}/runs/${runId}?done=cancelled`, 303);
  });
}


function RunText({ run }: { run: Schemas['Run'] }) {
  const out = run.stdout ?? '';
  const err = run.stderr ?? '';
  if (!out && !err) return <span class="muted">(no output)</span>;
  return (
    <>
      {out}
      {err ? <span class="stderr">{err}</span> : null}
    </>
  );
}
