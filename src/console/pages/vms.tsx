import { call, idempotencyHeader, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp, type ConsoleDeps } from '../app.tsx';
import { ActionButton, noticeFor, pricingOf, shortId, Status, Time } from '../components.tsx';
import { count, money, TRANSITIONAL } from '../format.ts';
import { Csrf, fragment, page } from '../layout.tsx';
import { onRefusal } from '../problem.tsx';
import { Table, TableRows, type Column } from '../table.tsx';
import { OFFER_CHOICES, offerBody, offerValue, parseOffer, quote, type Offer } from '../pricing.ts';
import { ClientError } from '../api.ts';
import { newCsrfValue } from '../security.ts';
import type { ConsoleSession } from '../../domain/sessions.ts';

/** How often a list polls: quickly while something is changing, slowly otherwise. */
const pollEvery = (statuses: string[]) => (statuses.some((s) => TRANSITIONAL.has(s)) ? '2s' : '10s');

const COLUMNS = (session: ConsoleSession): Column<Schemas['VM']>[] => [
  {
    label: 'VM',
    cell: (vm) => (
      <a href={`/console/vms/${vm.vm_id}`} class="mono">
        {vm.vm_id}
      </a>
    ),
  },
  { label: 'Status', cell: (vm) => <Status status={vm.status} reason={vm.status_reason} /> },
  { label: 'Harness', cell: (vm) => vm.harness_display },
  { label: 'Pricing', cell: (vm) => pricingOf(vm) },
  { label: 'Created', cell: (vm) => <Time at={vm.created_at} /> },
  {
    label: 'Actions',
    hiddenLabel: true,
    class: 'row-actions',
    cell: (vm) =>
      vm.status === 'running' ? (
        <ActionButton session={session} action={`/console/vms/${vm.vm_id}/stop`} label="Stop" back="list" />
      ) : vm.status === 'stopped' || vm.status === 'failed' ? (
        <ActionButton session={session} action={`/console/vms/${vm.vm_id}/start`} label="Start" back="list" />
      ) : null,
  },
];

/** The list's rows, which poll themselves (quickly while a status is changing). */
function VmRows({ vms, session }: { vms: Schemas['VM'][]; session: ConsoleSession }) {
  return (
    <TableRows
      columns={COLUMNS(session)}
      rows={vms}
      empty="No VMs yet. Create one below: it boots in seconds."
      attrs={{ id: 'vm-rows', 'hx-get': '/console/vms/rows', 'hx-trigger': `every ${pollEvery(vms.map((v) => v.status))}`, 'hx-swap': 'outerHTML' }}
    />
  );
}

function Quote({ offer }: { offer: Offer | null }) {
  if (!offer) return <div id="quote" class="quote" aria-live="polite">Choose a plan or a tier to see the price.</div>;
  const q = quote(offer);
  return (
    <div id="quote" class="quote" aria-live="polite">
      <span class="quote-price">{q.headline}</span>
      <span class="quote-detail">{q.detail}</span>
    </div>
  );
}

function CreateForm({ harnesses, offer, harness, images, image }: { harnesses: Schemas['HarnessList']; offer: Offer; harness?: string; images: Schemas['Image'][]; image?: string }) {
  const groups = [...new Set(OFFER_CHOICES.map((o) => o.group))];
  const cycle = offer.kind === 'plan' ? offer.cycle : 'monthly';
  return (
    <form class="card stack" method="get" action="/console/vms/new" hx-get="/console/vms/quote" hx-trigger="change" hx-target="#quote" hx-swap="outerHTML">
      <h2>New VM</h2>
      <div class="grid-create">
        <div class="field">
          <label for="offer">Plan or tier</label>
          <select id="offer" name="offer">
            {groups.map((g) => (
              <optgroup label={g}>
                {OFFER_CHOICES.filter((o) => o.group === g).map((o) => (
                  <option value={o.value} selected={o.value === offerValue(offer)}>
                    {o.label}
                  </option>
                ))}
              </optgroup>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="cycle">Billing cycle (plans)</label>
          <select id="cycle" name="cycle">
            <option value="monthly" selected={cycle === 'monthly'}>
              Monthly
            </option>
            <option value="annual" selected={cycle === 'annual'}>
              Annual (two months free)
            </option>
          </select>
        </div>
        <div class="field">
          <label for="harness">Agent harness</label>
          <select id="harness" name="harness">
            {harnesses.data.map((h) => (
              <option value={h.id} selected={harness ? h.id === harness : h.default}>
                {h.display_name}
                {h.auth.mode === 'none' ? ' (no account needed)' : ''}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="image">Image</label>
          <select id="image" name="image">
            <option value="base">base (the workstation)</option>
            {images.map((i) => (
              <option value={i.slug} selected={i.slug === image || i.image_id === image}>
                {i.name} ({i.slug}{i.visibility === 'public' ? ', public' : ''})
              </option>
            ))}
          </select>
        </div>
      </div>
      <Quote offer={offer} />
      <div class="button-row">
        <button type="submit" class="button primary">
          Review and create
        </button>
        <span class="muted small">Nothing is charged until you confirm.</span>
      </div>
    </form>
  );
}

async function vmsPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number } = {}) {
  const api = c.get('api');
  const session = c.get('session') as ConsoleSession;
  const [vms, harnesses, images] = await Promise.all([
    call(api.GET('/v1/api/vms')),
    call(api.GET('/v1/api/harnesses')),
    call(api.GET('/v1/api/images', { params: { query: { limit: 100 } } })),
  ]);
  const ready = images.data.filter((i) => i.status === 'ready');
  return page(
    c,
    { title: 'VMs', section: 'vms', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <>
      <section class="card" aria-labelledby="list-h">
        <div class="section-head">
          <h2 id="list-h">Your VMs</h2>
          <span class="muted small">
            {count(vms.total)} VM{vms.total === 1 ? '' : 's'} · statuses update by themselves
          </span>
        </div>
        <Table caption="Your VMs, newest first" columns={COLUMNS(session)} body={<VmRows vms={vms.data} session={session} />} />
      </section>
      <CreateForm harnesses={harnesses} offer={{ kind: 'plan', plan: 'starter', cycle: 'monthly' }} images={ready} image={c.req.query('image')} />
    </>,
  );
}

export function registerVms(app: ConsoleApp, _deps: ConsoleDeps) {
  app.get('/vms', (c) => vmsPage(c));

  app.get('/vms/rows', async (c) => {
    const vms = await call(c.get('api').GET('/v1/api/vms'));
    return fragment(c, <VmRows vms={vms.data} session={c.get('session')} />);
  });

  app.get('/vms/quote', (c) => fragment(c, <Quote offer={parseOffer(c.req.query('offer') ?? '', c.req.query('cycle') ?? '')} />));

  // The review step: the price, what it is charged to, and one button that charges it.
  app.get('/vms/new', async (c) => {
    const api = c.get('api');
    const offer = parseOffer(c.req.query('offer') ?? '', c.req.query('cycle') ?? '');
    const harnessId = c.req.query('harness') ?? '';
    if (!offer) return vmsPage(c, { problem: new ClientError('invalid_request', 'offer: choose one of the plans or tiers', undefined, 400), status: 400 });
    const [harnesses, billing] = await Promise.all([call(api.GET('/v1/api/harnesses')), call(api.GET('/v1/api/billing'))]);
    const harness = harnesses.data.find((h) => h.id === harnessId);
    if (!harness) return vmsPage(c, { problem: new ClientError('invalid_request', `harness: unknown harness "${harnessId}"`, 'pick one from the list', 400), status: 400 });
    return reviewPage(c, offer, harness, billing, (c.req.query('image') ?? 'base').trim().slice(0, 200) || 'base');
  });

  app.post('/vms', async (c) => {
    const api = c.get('api');
    const offer = parseOffer(await field(c, 'offer'), await field(c, 'cycle'));
    if (!offer) return vmsPage(c, { problem: new ClientError('invalid_request', 'offer: choose one of the plans or tiers', undefined, 400), status: 400 });
    const image = await field(c, 'image');
    const body = { ...offerBody(offer), harness: await field(c, 'harness'), ...(image && image !== 'base' ? { image } : {}) };
    const headers = idempotencyHeader(await field(c, 'idempotency_key'));
    return onRefusal(
      async () => {
        const created = await call(api.POST('/v1/api/vms', { body, headers }));
        return c.redirect(`/console/vms/${created.vm_id}?done=created`, 303);
      },
      (problem) => vmsPage(c, { problem, status: problem.status }),
    );
  });
}

async function reviewPage(c: ConsoleContext, offer: Offer, harness: Schemas['Harness'], billing: Schemas['Billing'], image: string) {
  const session = c.get('session') as ConsoleSession;
  const q = quote(offer);
  const payment =
    offer.kind === 'plan'
      ? billing.card_on_file
        ? `Charged to ${billing.brand} •••• ${billing.last4}`
        : 'No card on file: the charge will be refused until a card is added.'
      : `Prepaid credits: ${money(billing.credits_cents)} available`;
  return page(
    c,
    { title: 'Review your new VM', section: 'vms', session, crumbs: [{ href: '/console/vms', label: 'VMs' }] },
    <form class="card narrow stack" method="post" action="/console/vms">
      <Csrf session={session} />
      <input type="hidden" name="offer" value={offerValue(offer)} />
      <input type="hidden" name="cycle" value={offer.kind === 'plan' ? offer.cycle : ''} />
      <input type="hidden" name="harness" value={harness.id} />
      <input type="hidden" name="image" value={image} />
      <input type="hidden" name="idempotency_key" value={newCsrfValue()} />
      <dl class="facts">
        <dt>Harness</dt>
        <dd>{harness.display_name}</dd>
        <dt>Image</dt>
        <dd class="mono">{image}</dd>
        <dt>Pricing</dt>
        <dd>{offer.kind === 'plan' ? `${offer.plan} plan, billed ${offer.cycle}` : `${offer.tier} tier`}</dd>
        <dt>Payment</dt>
        <dd>{payment}</dd>
      </dl>
      <div class="quote big" id="price">
        <span class="quote-price">{q.headline}</span>
        <span class="quote-detail">{q.detail}</span>
      </div>
      <div class="button-row">
        <button type="submit" class="button primary">
          {q.chargeNowCents > 0 ? `Pay ${money(q.chargeNowCents)} and create` : 'Create VM'}
        </button>
        <a class="button ghost" href="/console/vms">
          Cancel
        </a>
      </div>
    </form>,
  );
}
