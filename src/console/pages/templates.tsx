import { call, ClientError, idempotencyHeader, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp, type ConsoleDeps } from '../app.tsx';
import { noticeFor, Pager, Status } from '../components.tsx';
import { bytes, count, money } from '../format.ts';
import { Csrf, page } from '../layout.tsx';
import { PLANS, PLAN_IDS, type PlanId } from '../../domain/plans.ts';
import { newCsrfValue } from '../security.ts';
import type { ConsoleSession } from '../../domain/sessions.ts';

const PAGE_SIZE = 24;
const SORTS = [
  { value: 'trending', label: 'Trending' },
  { value: 'new', label: 'Newest' },
  { value: 'forks', label: 'Most forked' },
  { value: 'stars', label: 'Most starred' },
] as const;
type Sort = (typeof SORTS)[number]['value'];

/** How the gallery's sort orders images: they have no stars, so `stars` orders them by use, as `forks`. */
const IMAGE_SORT = { trending: 'trending', new: 'new', forks: 'forks', stars: 'forks' } as const;
const IMAGES_SHOWN = 6;

/** A public image in the gallery: what it is, and a VM of it. */
function ImageCard({ i }: { i: Schemas['Image'] }) {
  return (
    <li class="tpl card">
      <div class="tpl-head">
        <h3 class="tpl-name">{i.name}</h3>
        <span class="badge">image</span>
      </div>
      <p class="tpl-meta muted small">
        <span>{count(i.packages.length)} packages</span> · <span>{i.size_bytes === null ? '—' : bytes(i.size_bytes)}</span>
      </p>
      <div class="tpl-foot">
        <a class="button small" href={`/console/vms?image=${encodeURIComponent(i.slug)}#image`} aria-label={`A VM of ${i.name}`}>
          New VM of it
        </a>
        <a class="mono muted small" href={`/console/images/${encodeURIComponent(i.image_id)}`}>
          {i.slug}
        </a>
      </div>
    </li>
  );
}

function Card({ t }: { t: Schemas['Template'] }) {
  return (
    <li class="tpl card">
      <div class="tpl-head">
        <h3 class="tpl-name">{t.name}</h3>
        {t.owned ? <span class="badge">yours · {t.visibility}</span> : null}
      </div>
      <p class="tpl-desc">{t.description || <span class="muted">No description.</span>}</p>
      <p class="tpl-meta muted small">
        <span>{t.harness}</span> · <span>{count(t.forks)} forks</span> · <span>{count(t.stars)} stars</span> · <span>{bytes(t.size_bytes)}</span>
      </p>
      {t.tags.length ? (
        <ul class="tags" aria-label="Tags">
          {t.tags.slice(0, 5).map((tag) => (
            <li>{tag}</li>
          ))}
        </ul>
      ) : null}
      <div class="tpl-foot">
        {t.status === 'ready' ? (
          <a class="button small" href={`/console/templates/${encodeURIComponent(t.template_id)}/fork`} aria-label={`Fork ${t.name}`}>
            Fork
          </a>
        ) : (
          <Status status={t.status} />
        )}
        <span class="mono muted small">{t.slug}</span>
      </div>
    </li>
  );
}

async function galleryPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number } = {}) {
  const api = c.get('api');
  const session = c.get('session') as ConsoleSession;
  const q = (c.req.query('q') ?? '').trim().slice(0, 200);
  const harness = (c.req.query('harness') ?? '').trim();
  const sort: Sort = SORTS.some((s) => s.value === c.req.query('sort')) ? (c.req.query('sort') as Sort) : 'trending';
  const offset = Math.min(1_000_000_000, Math.max(0, Number.parseInt(c.req.query('offset') ?? '0', 10) || 0));
  const query = { sort, limit: PAGE_SIZE, offset, ...(q ? { q } : {}), ...(harness ? { harness } : {}) };
  const [list, harnesses, vms, images] = await Promise.all([
    call(api.GET('/v1/api/templates', { params: { query } })),
    call(api.GET('/v1/api/harnesses')),
    call(api.GET('/v1/api/vms')),
    // Public images, with the same search and sort (an image has no harness: a harness filter shows none).
    harness
      ? Promise.resolve({ data: [] as Schemas['Image'][], total: 0 })
      : call(api.GET('/v1/api/images', { params: { query: { visibility: 'public', sort: IMAGE_SORT[sort], limit: IMAGES_SHOWN, ...(q ? { q } : {}) } } })),
  ]);
  const capturable = vms.data.filter((v) => v.status === 'running' || v.status === 'stopped');
  const extra: Record<string, string> = { sort, ...(q ? { q } : {}), ...(harness ? { harness } : {}) };
  return page(
    c,
    { title: 'Templates', section: 'templates', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <>
      <form class="toolbar" method="get" action="/console/templates" role="search">
        <div class="field grow">
          <label for="q">Search</label>
          <input id="q" name="q" type="search" value={q} placeholder="name, description or tag" maxlength={200} />
        </div>
        <div class="field">
          <label for="harness-filter">Harness</label>
          <select id="harness-filter" name="harness">
            <option value="">Any</option>
            {harnesses.data.map((h) => (
              <option value={h.id} selected={h.id === harness}>
                {h.display_name}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="sort">Sort by</label>
          <select id="sort" name="sort">
            {SORTS.map((s) => (
              <option value={s.value} selected={s.value === sort}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        <div class="field end">
          <button type="submit" class="button">
            Apply
          </button>
        </div>
      </form>
      <p class="muted" role="status">
        {count(list.total)} template{list.total === 1 ? '' : 's'}
        {q ? ` matching “${q}”` : ''}
      </p>
      {list.data.length ? (
        <ul class="tpl-grid">
          {list.data.map((t) => (
            <Card t={t} />
          ))}
        </ul>
      ) : (
        <p class="empty card">No template matches. Try another search.</p>
      )}
      <Pager base="/console/templates" param="offset" offset={offset} size={PAGE_SIZE} total={list.total} label="Template pages" extra={extra} />
      {images.total > 0 ? (
        <section class="stack" aria-labelledby="images-h">
          <h2 id="images-h">Public images</h2>
          <p class="muted small">
            {count(images.total)} public image{images.total === 1 ? '' : 's'}
            {q ? ` matching “${q}”` : ''}: toolchains built from a Dockerfile that a VM of yours can start with.
            {images.total > images.data.length ? (
              <>
                {' '}
                <a href="/console/images">All images</a>
              </>
            ) : null}
          </p>
          <ul class="tpl-grid">
            {images.data.map((i) => (
              <ImageCard i={i} />
            ))}
          </ul>
        </section>
      ) : null}
      <section class="card stack" aria-labelledby="capture-h">
        <h2 id="capture-h">Capture one of your VMs</h2>
        {capturable.length === 0 ? (
          <p class="empty">You have no running or stopped VM to capture.</p>
        ) : (
          <form class="grid-capture" method="post" action="/console/templates/capture">
            <Csrf session={session} />
            <div class="field">
              <label for="capture-vm">VM</label>
              <select id="capture-vm" name="vm_id">
                {capturable.map((v) => (
                  <option value={v.vm_id}>
                    {v.vm_id} ({v.harness_display}, {v.status})
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="capture-name">Template name</label>
              <input id="capture-name" name="name" maxlength={100} required />
            </div>
            <div class="field">
              <label for="capture-visibility">Visibility</label>
              <select id="capture-visibility" name="visibility">
                <option value="private">Private</option>
                <option value="public">Public</option>
              </select>
            </div>
            <div class="field end">
              <button type="submit" class="button">
                Capture
              </button>
            </div>
          </form>
        )}
      </section>
    </>,
  );
}

export function registerTemplates(app: ConsoleApp, _deps: ConsoleDeps) {
  app.get('/templates', (c) => galleryPage(c));

  app.post('/templates/capture', async (c) => {
    try {
      const vmId = await field(c, 'vm_id');
      await call(
        c.get('api').POST('/v1/api/vms/{id}/capture', {
          params: { path: { id: vmId } },
          body: { name: await field(c, 'name'), visibility: (await field(c, 'visibility')) as 'public' },
        }),
      );
      return c.redirect('/console/templates?sort=new&done=capturing', 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return galleryPage(c, { problem: err, status: err.status });
    }
  });

  // Forking charges a plan: this page says how much before the button that charges it.
  app.get('/templates/:id/fork', async (c) => {
    const api = c.get('api');
    const session = c.get('session');
    const [t, billing] = await Promise.all([
      call(api.GET('/v1/api/templates/{id}', { params: { path: { id: c.req.param('id') } } })),
      call(api.GET('/v1/api/billing')),
    ]);
    return page(
      c,
      { title: `Fork “${t.name}”`, section: 'templates', session, crumbs: [{ href: '/console/templates', label: 'Templates' }] },
      <form class="card narrow stack" method="post" action={`/console/templates/${encodeURIComponent(t.template_id)}/fork`}>
        <Csrf session={session} />
        <input type="hidden" name="idempotency_key" value={newCsrfValue()} />
        <p>A new VM starts with this template's persist disk ({bytes(t.size_bytes)}), running {t.harness}.</p>
        <fieldset class="stack">
          <legend>Plan for the new VM, billed monthly</legend>
          {PLAN_IDS.map((p, i) => (
            <label class="radio">
              <input type="radio" name="plan" value={p} checked={i === 0} />
              <span>
                <strong>{p}</strong> — {PLANS[p].vcpus} vCPU, {PLANS[p].memory_mib / 1024} GiB — <strong>{money(PLANS[p].monthly_cents)}</strong> charged now
              </span>
            </label>
          ))}
        </fieldset>
        <p class="muted small">{billing.card_on_file ? `Charged to ${billing.brand} •••• ${billing.last4}.` : 'No card on file: the charge will be refused until a card is added.'}</p>
        <div class="button-row">
          <button type="submit" class="button primary">
            Pay and fork
          </button>
          <a class="button ghost" href="/console/templates">
            Cancel
          </a>
        </div>
      </form>,
    );
  });

  app.post('/templates/:id/fork', async (c) => {
    const plan = await field(c, 'plan');
    try {
      if (!(PLAN_IDS as string[]).includes(plan)) throw new ClientError('invalid_request', 'plan: choose starter, pro or max', undefined, 400);
      const vm = await call(
        c.get('api').POST('/v1/api/templates/{id}/fork', {
          params: { path: { id: c.req.param('id') } },
          body: { plan: plan as PlanId },
          headers: idempotencyHeader(await field(c, 'idempotency_key')),
        }),
      );
      return c.redirect(`/console/vms/${vm.vm_id}?done=forked`, 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return galleryPage(c, { problem: err, status: err.status });
    }
  });
}
