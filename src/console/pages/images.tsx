import { call, ClientError, type Schemas } from '../api.ts';
import { field, type ConsoleContext, type ConsoleApp } from '../app.tsx';
import { noticeFor, Pager, Status, Time } from '../components.tsx';
import { bytes, count } from '../format.ts';
import { Csrf, page } from '../layout.tsx';
import { SECURITY_HEADERS } from '../security.ts';
import type { ConsoleSession } from '../../domain/sessions.ts';

const PAGE_SIZE = 25;
const imagePath = (id: string) => `/console/images/${encodeURIComponent(id)}`;
const SAMPLE = 'FROM base\nRUN apt-get update && apt-get install -y --no-install-recommends postgresql-client\n';
const BUILD_ALLOW = '@debian @github @npm @pypi';

/** The images list, and the form that builds one from a pasted Dockerfile. */
async function imagesPage(c: ConsoleContext, opts: { problem?: ClientError; status?: number; form?: Record<string, string> } = {}) {
  const api = c.get('api');
  const session = c.get('session') as ConsoleSession;
  const offset = Math.min(1_000_000_000, Math.max(0, Number.parseInt(c.req.query('offset') ?? '0', 10) || 0));
  const list = await call(api.GET('/v1/api/images', { params: { query: { limit: PAGE_SIZE, offset } } }));
  const form = opts.form ?? {};
  return page(
    c,
    { title: 'Images', section: 'images', session, problem: opts.problem, status: opts.status, notice: noticeFor(c.req.query('done')) },
    <>
      <p class="muted">
        What a VM's root starts with: <a href={imagePath('base')}>base</a>, the workstation every VM has by default, or one of yours built from a Dockerfile.
        {` ${count(list.total)} image${list.total === 1 ? '' : 's'} of yours or public.`}
      </p>
      {list.data.length ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Visibility</th>
                <th scope="col">Size</th>
                <th scope="col">Built</th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((i) => (
                <tr>
                  <td>
                    <a href={imagePath(i.image_id)}>{i.name}</a> <span class="mono muted small">{i.slug}</span>
                  </td>
                  <td>
                    <Status status={i.status} />
                  </td>
                  <td>{i.visibility}</td>
                  <td>{i.size_bytes === null ? '—' : bytes(i.size_bytes)}</td>
                  <td>
                    <Time at={i.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <p class="empty card">No image of yours yet. Build one below.</p>
      )}
      <Pager base="/console/images" param="offset" offset={offset} size={PAGE_SIZE} total={list.total} label="Image pages" />
      <section class="card stack" aria-labelledby="build-h">
        <h2 id="build-h">Build an image from a Dockerfile</h2>
        <p class="muted small">
          One stage: FROM base or one of your images, then RUN, COPY, ADD, ENV, WORKDIR, USER and ARG. It builds in a VM of yours; RUN steps reach only what the
          egress list allows. Files to COPY are sent with <span class="mono">agentvm images build</span>.
        </p>
        <form class="stack" method="post" action="/console/images">
          <Csrf session={session} />
          <div class="field">
            <label for="image-name">Name</label>
            <input id="image-name" name="name" maxlength={100} required value={form.name ?? ''} />
          </div>
          <div class="field">
            <label for="image-dockerfile">Dockerfile</label>
            <textarea id="image-dockerfile" name="dockerfile" rows={10} class="mono" required spellcheck={false}>
              {form.dockerfile ?? SAMPLE}
            </textarea>
          </div>
          <div class="field">
            <label for="image-allow">What RUN steps may reach (hosts, *.domains or presets)</label>
            <input id="image-allow" name="allow" value={form.allow ?? BUILD_ALLOW} />
          </div>
          <div class="field">
            <label for="image-visibility">Visibility</label>
            <select id="image-visibility" name="visibility">
              <option value="private">Private</option>
              <option value="public" selected={form.visibility === 'public'}>
                Public
              </option>
            </select>
          </div>
          <div class="button-row">
            <button type="submit" class="button primary">
              Build
            </button>
          </div>
        </form>
      </section>
    </>,
  );
}

function Packages({ image }: { image: Schemas['Image'] }) {
  if (!image.packages.length) return <p class="muted">Its packages are listed once it is ready.</p>;
  return (
    <details>
      <summary>{count(image.packages.length)} packages</summary>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Package</th>
              <th scope="col">Version</th>
            </tr>
          </thead>
          <tbody>
            {image.packages.map((p) => (
              <tr>
                <td class="mono">{p.name}</td>
                <td class="mono">{p.version}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
}

export function registerImages(app: ConsoleApp) {
  app.get('/images', (c) => imagesPage(c));

  app.post('/images', async (c) => {
    const form = { name: await field(c, 'name'), dockerfile: await field(c, 'dockerfile'), allow: await field(c, 'allow'), visibility: await field(c, 'visibility') };
    try {
      const allow = form.allow.split(/[\s,]+/).filter(Boolean);
      const image = await call(
        c.get('api').POST('/v1/api/images', {
          body: { name: form.name, dockerfile: `${form.dockerfile}\n`, visibility: form.visibility === 'public' ? 'public' : 'private', egress: allow.length ? { mode: 'allowlist', allow } : { mode: 'none', allow: [] } },
        }),
      );
      return c.redirect(imagePath(image.image_id), 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return imagesPage(c, { problem: err, status: err.status, form });
    }
  });

  // An image: its facts, its build log (live while it builds), its packages, and deleting it.
  app.get('/images/:id', async (c) => {
    const session = c.get('session');
    const image = await call(c.get('api').GET('/v1/api/images/{id}', { params: { path: { id: c.req.param('id') } } }));
    const own = image.image_id !== 'base';
    const building = image.status === 'queued' || image.status === 'building';
    return page(
      c,
      { title: image.name, section: 'images', session, kind: 'run', crumbs: [{ href: '/console/images', label: 'Images' }], notice: noticeFor(c.req.query('done')) },
      <div class="stack">
        <section class="card stack" aria-labelledby="image-h">
          <div class="section-head">
            <h2 id="image-h">
              {image.name} <span class="mono muted small">{image.image_id}</span>
            </h2>
            <span id="run-status" aria-live="polite">
              <Status status={image.status} reason={image.status_reason} />
            </span>
          </div>
          <dl class="facts grid-facts">
            <dt>Slug</dt>
            <dd class="mono">{image.slug}</dd>
            <dt>FROM</dt>
            <dd class="mono">{image.parent ?? '—'}</dd>
            <dt>Visibility</dt>
            <dd>{image.visibility}</dd>
            <dt>Size</dt>
            <dd>{image.size_bytes === null ? '—' : bytes(image.size_bytes)}</dd>
            <dt>Ready</dt>
            <dd>
              <Time at={image.ready_at} />
            </dd>
          </dl>
          <p class="muted small">
            New VMs of it: <span class="mono">agentvm vms create --image {image.slug}</span>
          </p>
        </section>
        {own ? (
          <section class="card stack" aria-labelledby="log-h">
            <div class="section-head">
              <h2 id="log-h">Build log</h2>
              {building ? (
                <span class="muted small" id="run-progress">
                  <span class="spinner" aria-hidden="true"></span> streaming as it comes…
                </span>
              ) : null}
            </div>
            <pre id="run-output" class="output" tabindex={0} aria-label="Build log" aria-live="off" data-stream={`${imagePath(image.image_id)}/events`}></pre>
          </section>
        ) : null}
        <section class="card stack" aria-labelledby="packages-h">
          <h2 id="packages-h">Packages</h2>
          <Packages image={image} />
        </section>
        {own ? (
          <form method="post" action={`${imagePath(image.image_id)}/delete`} class="inline">
            <Csrf session={session} />
            <button type="submit" class="button small danger">
              Delete image
            </button>
          </form>
        ) : null}
      </div>,
    );
  });

  // The build log's event stream, from the API's own operation, so that the browser follows it as the CLI does.
  app.get('/images/:id/events', async (c) => {
    const headers: Record<string, string> = {};
    const last = c.req.header('last-event-id');
    if (last) headers['Last-Event-ID'] = last;
    const res = await c.get('api').GET('/v1/api/images/{id}/build/events', { params: { path: { id: c.req.param('id') } }, headers, parseAs: 'stream' });
    if (!res.response.ok || !res.response.body) return c.body(null, res.response.status as 404);
    return new Response(res.response.body, {
      status: 200,
      headers: { ...SECURITY_HEADERS, 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' },
    });
  });

  app.post('/images/:id/delete', async (c) => {
    try {
      await call(c.get('api').DELETE('/v1/api/images/{id}', { params: { path: { id: c.req.param('id') } } }));
      return c.redirect('/console/images?done=image_deleted', 303);
    } catch (err) {
      if (!(err instanceof ClientError)) throw err;
      return imagesPage(c, { problem: err, status: err.status });
    }
  });
}
