import { call, type Schemas } from '../api.ts';
import type { ConsoleApp, ConsoleContext } from '../app.tsx';
import { Time } from '../components.tsx';
import { page } from '../layout.tsx';
import { Table, type Column } from '../table.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';

const EVENTS_PAGE = 50;

/** What an event is about: the id of the object it carries (a VM, a run, a template, a key), as text. */
function subjectOf(e: Schemas['Event']): string {
  const d = e.data as Record<string, unknown>;
  for (const k of ['vm_id', 'run_id', 'template_id', 'key_id']) if (typeof d[k] === 'string') return d[k] as string;
  return '';
}

const COLUMNS: Column<Schemas['Event']>[] = [
  { label: 'When', cell: (e) => <Time at={e.created_at} /> },
  { label: 'Type', cell: (e) => <code>{e.type}</code> },
  { label: 'About', class: 'mono', cell: (e) => subjectOf(e) || '—' },
  { label: 'Event id', class: 'mono', cell: (e) => e.event_id },
  {
    label: 'Data',
    cell: (e) => (
      <details>
        <summary>Show</summary>
        <pre class="task-text event-data">{JSON.stringify(e.data, null, 2)}</pre>
      </details>
    ),
  },
];

/** The tenant's events, oldest first, a page at a time after the last one seen. */
async function eventsPage(c: ConsoleContext) {
  const session = c.get('session') as ConsoleSession;
  const after = c.req.query('after') || undefined;
  const events = await call(c.get('api').GET('/v1/api/events', { params: { query: { after, limit: EVENTS_PAGE } } }));
  const last = events.data.at(-1)?.event_id;
  return page(
    c,
    { title: 'Events', section: 'events', session },
    <section class="card stack" aria-labelledby="events-h">
      <div class="section-head">
        <h2 id="events-h">{after ? 'Events after the previous page' : 'Events of the last 30 days'}</h2>
        <span class="muted small">oldest first</span>
      </div>
      {events.data.length === 0 ? (
        <p class="empty">{after ? 'Nothing newer yet.' : 'No events yet. Creating, stopping or deleting a VM, a finished run, a key issued: each writes one.'}</p>
      ) : (
        <Table id="event-rows" caption="Events, oldest first" columns={COLUMNS} rows={events.data} />
      )}
      <nav class="pager" aria-label="Event pages">
        {after ? <a href="/console/events">← From the start</a> : <span class="disabled">← From the start</span>}
        {events.has_more && last ? (
          <a href={`/console/events?after=${encodeURIComponent(last)}`}>Newer →</a>
        ) : last ? (
          <a href={`/console/events?after=${encodeURIComponent(last)}`}>Check for newer →</a>
        ) : (
          <span class="disabled">Newer →</span>
        )}
      </nav>
    </section>,
  );
}

export function registerEvents(app: ConsoleApp) {
  app.get('/events', (c) => eventsPage(c));
}
