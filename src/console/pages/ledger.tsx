import { call, type Schemas } from '../api.ts';
import type { ConsoleApp, ConsoleContext } from '../app.tsx';
import { Pager, Time } from '../components.tsx';
import { money } from '../format.ts';
import { page } from '../layout.tsx';
import { offsetOf, Table, type Column } from '../table.tsx';
import type { ConsoleSession } from '../../domain/sessions.ts';

const LEDGER_PAGE = 25;
const LEDGER_KINDS: Record<string, string> = { card_charge: 'Card charge', credit_purchase: 'Credits bought', credit_draw: 'Credits drawn' };

const COLUMNS: Column<Schemas['LedgerEntry']>[] = [
  { label: 'When', cell: (e) => <Time at={e.created_at} /> },
  { label: 'Kind', cell: (e) => LEDGER_KINDS[e.kind] ?? e.kind },
  { label: 'Description', class: 'wrap-anywhere', cell: (e) => e.description },
  { label: 'For', class: 'mono', cell: (e) => (e.vm_id ? <a href={`/console/vms/${encodeURIComponent(e.vm_id)}`}>{e.vm_id}</a> : (e.template_id ?? '—')) },
  { label: 'Amount', cell: (e) => money(e.amount_cents) },
  { label: 'Credits', cell: (e) => (e.credits_delta_cents === 0 ? '—' : `${e.credits_delta_cents > 0 ? '+' : ''}${money(e.credits_delta_cents)}`) },
];

/** Every charge, credit purchase and draw, newest first, in pages. */
async function ledgerPage(c: ConsoleContext) {
  const session = c.get('session') as ConsoleSession;
  const offset = offsetOf(c.req.query('offset'));
  const ledger = await call(c.get('api').GET('/v1/api/billing/ledger', { params: { query: { limit: LEDGER_PAGE, offset } } }));
  return page(
    c,
    { title: 'Ledger', section: 'billing', session, crumbs: [{ href: '/console/billing', label: 'Billing' }] },
    <section class="card stack" aria-labelledby="ledger-h">
      <div class="section-head">
        <h2 id="ledger-h">Every charge, credit purchase and draw</h2>
        <span class="muted small">newest first; a correction is a new entry</span>
      </div>
      {ledger.data.length === 0 ? (
        <p class="empty">Nothing in the ledger yet.</p>
      ) : (
        <Table id="ledger-rows" caption="Ledger entries, newest first" columns={COLUMNS} rows={ledger.data} />
      )}
      <Pager base="/console/billing/ledger" param="offset" offset={offset} size={LEDGER_PAGE} total={ledger.total} label="Ledger pages" />
    </section>,
  );
}

export function registerLedger(app: ConsoleApp) {
  app.get('/billing/ledger', (c) => ledgerPage(c));
}
