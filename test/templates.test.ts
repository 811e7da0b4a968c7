import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, insertVm, type TestApp } from './helpers.ts';
import { randomBase62 } from '../src/domain/ids.ts';

async function insertTemplate(
  t: TestApp,
  owner: string | null,
  f: { slug: string; visibility: 'public' | 'private'; name?: string; tags?: string[]; forks?: number; harness?: string; scrubReport?: object },
) {
  const id = `tpl_${randomBase62(22)}`;
  await t.db.query(
    `INSERT INTO templates (template_id, tenant_id, slug, name, description, harness, visibility, tags, forks, status, scrub_report)
     VALUES ($1, $2, $3, $4, 'a workspace', $5, $6, $7, $8, 'ready', $9)`,
    [id, owner, f.slug, f.name ?? f.slug, f.harness ?? 'echo', f.visibility, f.tags ?? [], f.forks ?? 0, f.scrubReport ? JSON.stringify(f.scrubReport) : null],
  );
  return id;
}

for (const backend of backends()) {
  describe(`templates and lifecycle reads on ${backend.name}`, () => {
    let t: TestApp;
    const captured: string[] = [];
    before(async () => {
      t = await createTestApp(backend, { capture: (templateId) => captured.push(templateId) });
    });
    after(() => t.close());

    test('the list merges own and public templates; search, filters and paging walk every item once', async () => {
      const a = await t.tenant();
      const b = await t.tenant();
      const mine = await insertTemplate(t, a.tenantId, { slug: 'my-python-lab', visibility: 'private', tags: ['python'] });
      const theirsPrivate = await insertTemplate(t, b.tenantId, { slug: 'secret-lab', visibility: 'private' });
      const pub: string[] = [];
      for (let i = 0; i < 7; i++) {
        pub.push(await insertTemplate(t, b.tenantId, { slug: `public-${i}`, visibility: 'public', name: i % 2 ? `Python service ${i}` : `Rust crate ${i}`, forks: i, harness: i % 2 ? 'codex' : 'echo', tags: i % 2 ? ['python'] : ['rust'] }));
      }
      // A fresh install's gallery already has the platform's starter templates.
      const starters = (await t.db.query<{ template_id: string }>('SELECT template_id FROM templates WHERE tenant_id IS NULL')).map((r) => r.template_id);
      assert.ok(starters.length >= 4);
      const seen: string[] = [];
      let offset: number | null = 0;
      while (offset !== null) {
        const page: any = await t.request('GET', `/v1/api/templates?limit=3&offset=${offset}&sort=new`, { key: a.key });
        assert.equal(page.body.total, 8 + starters.length);
        seen.push(...page.body.data.map((x: any) => x.template_id));
        offset = page.body.next_offset;
        assert.equal(page.body.has_more, offset !== null);
      }
      assert.deepEqual([...seen].sort(), [mine, ...pub, ...starters].sort());
      assert.ok(!seen.includes(theirsPrivate));

      const search = await t.request('GET', '/v1/api/templates?q=python', { key: a.key });
      assert.equal(search.body.total, 4); // three public Python services and my tagged lab
      const codex = await t.request('GET', '/v1/api/templates?harness=codex&tag=python&sort=forks', { key: a.key });
      assert.deepEqual(codex.body.data.map((x: any) => x.slug), ['public-5', 'public-3', 'public-1']);
      const owned = search.body.data.find((x: any) => x.template_id === mine);
      assert.equal(owned.owned, true);
      assert.equal(search.body.data.find((x: any) => x.template_id !== mine).owned, false);
    });

    test('get by id, owned slug or public slug; another tenant\'s private template is 404 both ways', async () => {
      const a = await t.tenant();
      const b = await t.tenant();
      const priv = await insertTemplate(t, b.tenantId, { slug: 'b-private', visibility: 'private' });
      const pub = await insertTemplate(t, b.tenantId, { slug: 'b-public', visibility: 'public' });
      const mineSameSlug = await insertTemplate(t, a.tenantId, { slug: 'b-public', visibility: 'private' });
      assert.equal((await t.request('GET', `/v1/api/templates/${priv}`, { key: a.key })).status, 404);
      assert.equal((await t.request('GET', '/v1/api/templates/b-private', { key: a.key })).status, 404);
      assert.equal((await t.request('GET', `/v1/api/templates/${priv}`, { key: b.key })).status, 200);
      assert.equal((await t.request('GET', `/v1/api/templates/${pub}`, { key: a.key })).body.template_id, pub);
      assert.equal((await t.request('GET', '/v1/api/templates/b-public', { key: a.key })).body.template_id, mineSameSlug, 'owned first');
      assert.equal((await t.request('GET', '/v1/api/templates/b-public', { key: b.key })).body.template_id, pub);
      const fork = await t.request('POST', `/v1/api/templates/${priv}/fork`, { key: a.key });
      assert.equal(fork.status, 404);
      const forkNoCard = await t.request('POST', `/v1/api/templates/${pub}/fork`, { key: a.key });
      assert.equal(forkNoCard.status, 402);
      assert.equal(forkNoCard.body.error, 'card_required');

      // A template of a pro VM has a 50 GiB disk: a starter fork (10 GiB) could not hold it.
      const c = await t.tenant({ card: '4242' });
      await t.db.query(`UPDATE templates SET plan = 'pro' WHERE template_id = $1`, [pub]);
      const small = await t.request('POST', `/v1/api/templates/${pub}/fork`, { key: c.key, body: { plan: 'starter' } });
      assert.equal(small.status, 400);
      assert.equal(small.body.error, 'invalid_request');
      assert.match(small.body.message, /plan.*50 GiB.*10 GiB/);
      const charges = await t.db.query(`SELECT 1 FROM ledger WHERE tenant_id = $1`, [c.tenantId]);
      assert.equal(charges.length, 0);
    });

    test('the owner always sees scrub_report (null while capturing and when private); other tenants never see the field', async () => {
      const a = await t.tenant();
      const b = await t.tenant();
      const vmId = await insertVm(t.db, a.tenantId, { status: 'running' });
      const capture = await t.request('POST', `/v1/api/vms/${vmId}/capture`, { key: a.key, body: { visibility: 'public', name: 'Scrub report lab' } });
      assert.equal(capture.status, 201, capture.text);
      assert.equal(capture.body.status, 'capturing');
      assert.ok('scrub_report' in capture.body, 'the owner sees the field while capturing');
      assert.equal(capture.body.scrub_report, null);
      assert.ok(captured.includes(capture.body.template_id));
      assert.equal((await t.request('GET', `/v1/api/templates/${capture.body.template_id}`, { key: a.key })).body.scrub_report, null);

      const priv = await insertTemplate(t, a.tenantId, { slug: 'scrub-private', visibility: 'private' });
      const privOwned = await t.request('GET', `/v1/api/templates/${priv}`, { key: a.key });
      assert.ok('scrub_report' in privOwned.body);
      assert.equal(privOwned.body.scrub_report, null);

      const report = { removed: ['home/.ssh/id_ed25519'], redacted: [{ path: 'workspace/app/main.js', count: 1 }] };
      const pub = await insertTemplate(t, a.tenantId, { slug: 'scrub-public', visibility: 'public', scrubReport: report });
      assert.deepEqual((await t.request('GET', `/v1/api/templates/${pub}`, { key: a.key })).body.scrub_report, report);
      const seen = await t.request('GET', `/v1/api/templates/${pub}`, { key: b.key });
      assert.equal(seen.status, 200);
      assert.ok(!('scrub_report' in seen.body), 'another tenant never sees the field');
      const listed = (await t.request('GET', '/v1/api/templates?q=scrub&sort=new', { key: b.key })).body.data;
      assert.ok(listed.some((x: any) => x.template_id === pub));
      assert.ok(listed.every((x: any) => !('scrub_report' in x)));
      const owned = (await t.request('GET', '/v1/api/templates?limit=100', { key: a.key })).body.data.filter((x: any) => x.owned);
      assert.deepEqual(new Map(owned.map((x: any) => [x.template_id, x.scrub_report])), new Map([[capture.body.template_id, null], [priv, null], [pub, report]]));
    });

    test('lifecycle calls set the desired state and answer the VM; no-ops stay no-ops', async () => {
      const a = await t.tenant();
      const vmId = await insertVm(t.db, a.tenantId, { status: 'running' });
      const start = await t.request('POST', `/v1/api/vms/${vmId}/start`, { key: a.key });
      assert.equal(start.status, 200);
      assert.equal(start.body.status, 'running');
      const stop = await t.request('POST', `/v1/api/vms/${vmId}/stop`, { key: a.key });
      assert.equal(stop.body.status, 'stopping');
      const [row] = await t.db.query<{ desired_state: string }>('SELECT desired_state FROM vms WHERE vm_id = $1', [vmId]);
      assert.equal(row.desired_state, 'stopped');
      const restart = await t.request('POST', `/v1/api/vms/${vmId}/restart`, { key: a.key });
      assert.equal(restart.body.status, 'restarting');
      const run = await t.request('POST', `/v1/api/vms/${vmId}/run`, { key: a.key, body: { task: 'hello' } });
      assert.equal(run.status, 409);
      assert.equal(run.body.error, 'vm_not_running');
    });
  });
}
