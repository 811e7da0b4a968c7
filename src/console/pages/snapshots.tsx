import { call, ClientError, idempotencyHeader, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp } from '../app.tsx';
import { noticeFor, Time, vmPath } from '../components.tsx';
import { Field, PostForm, Select, Submit } from '../form.tsx';
import { bytes } from '../format.ts';
import { page } from '../layout.tsx';
import { offerBody, OFFER_CHOICES, parseOffer } from '../pricing.ts';
import { newCsrfValue } from '../security.ts';
import { Table, type Column } from '../table.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';

const PAGE_SIZE = 25;
const snapPath = (id: string) => `/console/snapshots/${encodeURIComponent(id)}`;

/** A table of snapshots (with the VM each is of, where they are not all one VM's) and their actions. */
export function snapshotColumns(actions: Column<Schemas['Snapshot']>['cell'], ofVm: boolean): Column<Schemas['Snapshot']>[] {
  return [
    { label: 'Name', cell: (s) => s.name },
    { label: 'Snapshot', class: 'mono', cell: (s) => s.snapshot_id },
    ...(ofVm ? [{ label: 'Of VM', cell: (s: Schemas['Snapshot']) => <a class="mono" href={vmPath(s.vm_id)}>{s.vm_id}</a> }] : []),
    { label: 'Size', cell: (s) => bytes(s.size_bytes) },
    { label: 'Taken', cell: (s) => <Time at={s.created_at} /> },
    { label: 'Actions', hiddenLabel: true, cell: actions },
  ];
}

/**
 * Every snapshot of the tenant, also of VMs destroyed since (a snapshot outlives its VM): a VM started
 * from one with the pricing picked here (each choice says its price; a VM from a snapshot has its
 * memory's size, so a plan of another size is refused with the reason), or deleted. Pages go by the
 * list's cursor (`after`).
 */
async function snapshotsPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number } = {}) {
  const api = c.get('api');
  const session = c.get('session') as ConsoleSession;
  const after = c.req.query('after') || undefined;
  const list = await call(api.GET('/v1/api/snapshots', { params: { query: { limit: PAGE_SIZE, ...(after ? { after } : {}) } } }));
  const columns = snapshotColumns(
    (s) => (
      <div class="button-row">
        <PostForm session={session} action={`${snapPath(s.snapshot_id)}/start`} class="inline" hidden={{ idempotency_key: newCsrfValue() }}>
          <Field id={`offer-${s.snapshot_id}`} label="Pricing">
            <Select id={`offer-${s.snapshot_id}`} name="offer" options={OFFER_CHOICES.map((o) => [o.value, `${o.group}: ${o.label}`])} />
          </Field>
          <Submit label="Start a VM from it" small ariaLabel={`Start a VM from it: ${s.name}`} />
        </PostForm>
        <PostForm session={session} action={`${snapPath(s.snapshot_id)}/delete`} class="inline">
          <Submit label="Delete" small variant="danger" ariaLabel={`Delete the snapshot ${s.name}`} />
        </PostForm>
      </div>
    ),
    true,
  );
  const last = list.data[list.data.length - 1];
  return page(
    c,
    { title: 'Snapshots', section: 'snapshots', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <div class="stack">
      <p class="muted">
        A snapshot keeps a running VM's memory, processes and disks at an instant; it outlives its VM. A VM started from one goes on from that instant with an identity of
        its own, charged like a new VM of the pricing you pick (plans are charged to your card now, tiers drawn from credits); it has the memory's size, so pick a
        pricing of that size. A VM's own page takes snapshots and branches it.
      </p>
      <Table caption="Your snapshots" columns={columns} rows={list.data} empty="No snapshot yet. Take one on a running VM's page." />
      {after || list.has_more ? (
        <nav class="pager" aria-label="Snapshot pages">
          {after ? <a href="/console/snapshots">← Newest</a> : <span class="disabled">← Newest</span>}
          {list.has_more && last ? <a href={`/console/snapshots?after=${encodeURIComponent(last.snapshot_id)}`}>Older →</a> : <span class="disabled">Older →</span>}
        </nav>
      ) : null}
    </div>,
  );
}

export function registerSnapshotsPage(app: ConsoleApp) {
  app.get('/snapshots', (c) => snapshotsPage(c));
  app.post('/snapshots/:id/start', async (c) => {
    const offer = parseOffer(await field(c, 'offer'), 'monthly');
    const headers = idempotencyHeader(await field(c, 'idempotency_key'));
    try {
      if (!offer) throw new ClientError('invalid_request', 'pick a pricing for the new VM', undefined, 400);
      const started = await call(c.get('api').POST('/v1/api/snapshots/{id}/vms', { params: { path: { id: c.req.param('id')! } }, body: offerBody(offer), headers }));
      return c.redirect(`${vmPath(started.vm_ids[0])}?done=snapshot_started`, 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return snapshotsPage(c, { problem: err, status: err.status });
    }
  });
  app.post('/snapshots/:id/delete', async (c) => {
    try {
      await call(c.get('api').DELETE('/v1/api/snapshots/{id}', { params: { path: { id: c.req.param('id')! } } }));
      return c.redirect('/console/snapshots?done=snapshot_deleted', 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return snapshotsPage(c, { problem: err, status: err.status });
    }
  });
}
