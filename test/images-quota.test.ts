/**
 * An image build's layers count in disk_gib once their size is known (section 14): its host makes it
 * ready only while the tenant stays within the limit with them counted; over it, nothing changes.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import * as imageStore from '../src/store/images.ts';
import { markBuiltReady } from '../src/domain/images.ts';
import { newId } from '../src/domain/ids.ts';
import type { DomainError } from '../src/domain/errors.ts';

for (const backend of backends()) {
  describe(`an image build's size in disk_gib (${backend.name})`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp(backend);
    });
    after(() => t.close());

    test('over the limit with its layers it is not made ready (quota_exceeded, the row unchanged); within it, it is', async () => {
      const { tenantId } = await t.tenant({ card: '4242' });
      await t.db.query(`INSERT INTO tenant_limits (tenant_id, name, value, updated_at) VALUES ($1, 'disk_gib', 10, now())`, [tenantId]);
      const build = async () => {
        const id = newId('img');
        await imageStore.insertQueued(t.db, { image_id: id, tenant_id: tenantId, name: 'tools', slug: `tools-${id.slice(-6).toLowerCase()}`, visibility: 'private', parent: 'base', dockerfile: 'FROM base', context: {}, egress: { mode: 'none', allow: [] }, created_at: new Date() });
        await t.db.query(`UPDATE images SET status = 'building', host_id = 'host_x' WHERE image_id = $1`, [id]);
        return id;
      };
      const result = { config: { env: {}, workdir: null, user: null }, packages: [], layerPath: '/layers/x.qcow2' } as unknown as Parameters<typeof markBuiltReady>[3];
      const big = await build();
      await assert.rejects(markBuiltReady(t.db, tenantId, big, { ...result, sizeBytes: 11 * 1024 ** 3 }, new Date(), 'host_x'), (e: DomainError) => e.code === 'quota_exceeded' && /disk_gib is 10/.test(e.message));
      const [row] = await t.db.query<{ status: string }>('SELECT status FROM images WHERE image_id = $1', [big]);
      assert.equal(row.status, 'building', 'nothing changed');
      const small = await build();
      assert.equal(await markBuiltReady(t.db, tenantId, small, { ...result, sizeBytes: 512 * 1024 ** 2 }, new Date(), 'host_x'), true);
      const [ready] = await t.db.query<{ status: string }>('SELECT status FROM images WHERE image_id = $1', [small]);
      assert.equal(ready.status, 'ready');
    });
  });
}
