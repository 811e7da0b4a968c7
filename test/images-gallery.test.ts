/**
 * Public images in the gallery (decisions §15): `GET /v1/api/images` with the template gallery's search
 * and sorts and a visibility filter, and the console's templates gallery listing public images under
 * the same search and sort, each with a way to a VM of it (the VM form takes an image). No VM is
 * started: the images are rows as a build leaves them.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { freshDb, insertVm } from './helpers.ts';
import { startConsoleServer, type ConsoleServer } from './consoleServer.ts';
import * as imageStore from '../src/store/images.ts';
import { newId } from '../src/domain/ids.ts';
import { SESSION_COOKIE } from '../src/console/security.ts';
import type { Db } from '../src/store/db.ts';

describe('public images in the gallery', () => {
  let db: Db;
  let drop: () => Promise<void>;
  let server: ConsoleServer;
  let mine: { tenantId: string; key: string; email: string };
  let other: { tenantId: string; key: string; email: string };
  const ids: Record<string, string> = {};

  /** A ready image of `tenantId`, `hoursOld` hours old, with `vms` VMs made of it. */
  const image = async (tenantId: string, name: string, o: { visibility: 'public' | 'private'; hoursOld: number; vms: number }) => {
    const imageId = newId('img');
    const at = new Date(Date.now() - o.hoursOld * 3600_000);
    await imageStore.insertQueued(db, { image_id: imageId, tenant_id: tenantId, name, slug: name.toLowerCase().replace(/ /g, '-'), visibility: o.visibility, parent: 'base', dockerfile: 'FROM base', context: {}, egress: { mode: 'none', allow: [] }, created_at: at });
    await imageStore.markReady(db, imageId, { layerPath: `/layers/${imageId}.qcow2`, sizeBytes: 5 * 1024 * 1024, config: { env: {}, workdir: '', user: '' }, packages: [{ name: 'git', version: '1' }] }, at);
    for (let i = 0; i < o.vms; i++) await imageStore.setVmImage(db, await insertVm(db, tenantId, { deleted: i > 0 }), imageId);
    ids[name] = imageId;
  };
  const list = async (key: string, query: string) => {
    const res = await fetch(`${server.url}/v1/api/images?${query}`, { headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, body: (await res.json()) as any };
  };
  const names = (body: any) => body.data.map((i: { name: string }) => i.name);

  before(async () => {
    ({ db, drop } = await freshDb({ name: 'pglite' }));
    server = await startConsoleServer(db);
    mine = await server.tenant('gallery-mine@example.com');
    other = await server.tenant('gallery-other@example.com');
    // Old and much used; new and a little used; a day old and unused; private ones.
    await image(other.tenantId, 'Rust toolchain', { visibility: 'public', hoursOld: 200, vms: 9 });
    await image(other.tenantId, 'Data science', { visibility: 'public', hoursOld: 1, vms: 2 });
    await image(mine.tenantId, 'Team python', { visibility: 'public', hoursOld: 24, vms: 0 });
    await image(mine.tenantId, 'Secret sauce', { visibility: 'private', hoursOld: 2, vms: 1 });
    await image(other.tenantId, 'Not yours', { visibility: 'private', hoursOld: 3, vms: 5 });
  });
  after(async () => {
    await server?.close();
    await drop?.();
  });

  test('the list: newest first by default; the sorts of the template gallery; visibility and search filter; total counts the filtered set', async () => {
    assert.deepEqual(names((await list(mine.key, '')).body), ['Data science', 'Secret sauce', 'Team python', 'Rust toolchain']);
    const forks = await list(mine.key, 'sort=forks');
    assert.deepEqual(names(forks.body), ['Rust toolchain', 'Data science', 'Secret sauce', 'Team python'], 'most VMs made of it first (deleted VMs count)');
    // (2 x 9) / 202^1.5 ≈ 0.006 against (2 x 2) / 3^1.5 ≈ 0.77: young and used passes old and much used.
    assert.deepEqual(names((await list(mine.key, 'sort=trending')).body), ['Data science', 'Secret sauce', 'Rust toolchain', 'Team python']);
    const gallery = await list(mine.key, 'visibility=public&sort=forks');
    assert.deepEqual(names(gallery.body), ['Rust toolchain', 'Data science', 'Team python'], "every tenant's public images, the caller's too");
    assert.equal(gallery.body.total, 3);
    assert.deepEqual(names((await list(mine.key, 'visibility=private')).body), ['Secret sauce'], "only the caller's private ones");
    const searched = await list(mine.key, 'visibility=public&q=rust&limit=1');
    assert.deepEqual([names(searched.body), searched.body.total, searched.body.has_more], [['Rust toolchain'], 1, false]);
    const paged = await list(mine.key, 'visibility=public&limit=2&offset=2&sort=forks');
    assert.deepEqual([names(paged.body), paged.body.total, paged.body.next_offset], [['Team python'], 3, null]);
    for (const bad of ['sort=stars', 'sort=hot', 'visibility=everyone']) {
      const r = await list(mine.key, bad);
      assert.equal(r.status, 400, bad);
      assert.equal(r.body.error, 'invalid_request');
    }
  });

  test("the console's gallery lists public images under the templates' search and sort; the VM form takes one", async () => {
    await server.services.login.start(mine.email);
    const { token } = await server.services.sessions.signIn(mine.email, server.codeFromLog(mine.email));
    const get = async (p: string) => {
      const res = await fetch(`${server.url}${p}`, { headers: { cookie: `${SESSION_COOKIE}=${token}` } });
      assert.equal(res.status, 200, p);
      return res.text();
    };
    const html = await get('/console/templates?sort=forks');
    const section = html.slice(html.indexOf('id="images-h"'));
    assert.match(section, /3 public images/);
    const order = ['Rust toolchain', 'Data science', 'Team python'].map((n) => section.indexOf(n));
    assert.ok(order.every((at, i) => at > 0 && (i === 0 || at > order[i - 1])), `most used first: ${order}`);
    assert.ok(!section.includes('Secret sauce') && !section.includes('Not yours'), 'no private image');
    assert.match(section, /href="\/console\/vms\?image=rust-toolchain#image"/);
    const searched = await get('/console/templates?q=science');
    assert.match(searched, /1 public image matching “science”/);
    assert.ok(!searched.slice(searched.indexOf('id="images-h"')).includes('Rust toolchain'));
    assert.ok(!(await get('/console/templates?harness=echo')).includes('id="images-h"'), 'a harness filter: images have none');

    const form = await get('/console/vms?image=rust-toolchain');
    assert.match(form, /<option value="rust-toolchain" selected="">Rust toolchain \(rust-toolchain, public\)<\/option>/);
    assert.match(form, /<option value="secret-sauce">/);
    const review = await get('/console/vms/new?offer=plan:starter&cycle=monthly&harness=echo&image=rust-toolchain');
    assert.match(review, /<input type="hidden" name="image" value="rust-toolchain"\/?>/);
  });
});
