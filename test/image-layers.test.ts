/**
 * Garbage collection of a host's image layers (host/layerGc.ts), on real qcow2 chains made with
 * qemu-img and the real store: what an image, a VM or a recent build needs stays with every layer
 * under it; deleted images' layers, cached steps unused for a week and stray files go; and it is safe
 * to stop at any point and run again (as after a crash and a restart).
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { backends, createTestApp, insertVm, type TestApp } from './helpers.ts';
import { collectLayers, chainOf } from '../src/host/layerGc.ts';
import * as imageStore from '../src/store/images.ts';
import { newId } from '../src/domain/ids.ts';

const DAY = 24 * 3600_000;
const haveQemuImg = (() => {
  try {
    execFileSync('qemu-img', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

for (const backend of backends()) {
  describe(`image layers no longer used are removed, on ${backend.name}`, { skip: haveQemuImg ? false : 'needs qemu-img' }, () => {
    let t: TestApp;
    let dir: string;
    before(async () => {
      t = await createTestApp(backend);
      dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-layers-'));
    });
    after(async () => {
      await t?.close();
      await rm(dir, { recursive: true, force: true });
    });

    /** A layer file on `backing` (or none), as a build's capture makes it. */
    const layer = (name: string, backing?: string) => {
      const file = path.join(dir, `${name}.qcow2`);
      execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', ...(backing ? ['-b', path.join(dir, `${backing}.qcow2`), '-F', 'qcow2'] : []), file, '64M']);
      return file;
    };
    const cacheRow = (name: string, usedDaysAgo: number, host = 'host_a') =>
      imageStore.saveLayer(t.db, host, `key-${name}`, path.join(dir, `${name}.qcow2`), 1, new Date(Date.now() - usedDaysAgo * DAY));
    /** A ready image of host_a whose last layer is `name`. */
    const image = async (tenantId: string, name: string, o: { deleted?: boolean } = {}) => {
      const imageId = newId('img');
      await imageStore.insertQueued(t.db, { image_id: imageId, tenant_id: tenantId, name, slug: `${name}-${imageId.slice(-6)}`, visibility: 'private', parent: 'base', dockerfile: 'FROM base', context: {}, egress: { mode: 'none', allow: [] }, created_at: new Date() });
      await t.db.query(`UPDATE images SET host_id = 'host_a' WHERE image_id = $1`, [imageId]);
      await imageStore.markReady(t.db, imageId, { layerPath: path.join(dir, `${name}.qcow2`), sizeBytes: 1, config: { env: {}, workdir: '', user: '' }, packages: [] }, new Date());
      if (o.deleted) await imageStore.markDeleted(t.db, tenantId, imageId, new Date());
      return imageId;
    };
    const present = (names: string[]) => names.filter((n) => existsSync(path.join(dir, `${n}.qcow2`)));

    test('kept: layers of images, of VMs and of recent builds, with the layers under them; removed: the rest', async () => {
      const { tenantId } = await t.tenant();
      // An image of three steps; a deleted image on its first two; a deleted image a VM still starts from.
      layer('base1');
      layer('step2', 'base1');
      layer('step3', 'step2');
      layer('gone3', 'step2');
      layer('vm1');
      layer('vm2', 'vm1');
      layer('old1'); // a cached step of a build long ago
      layer('recent1'); // a cached step of yesterday's build
      layer('other'); // a cache entry of another host (files of its own dir, not these)
      for (const [n, days] of [['base1', 30], ['step2', 30], ['step3', 30], ['gone3', 30], ['vm1', 30], ['vm2', 30], ['old1', 8], ['recent1', 1]] as const) await cacheRow(n, days);
      await cacheRow('other', 30, 'host_b');
      await image(tenantId, 'step3');
      await image(tenantId, 'gone3', { deleted: true });
      const vmImage = await image(tenantId, 'vm2', { deleted: true });
      const vmId = await insertVm(t.db, tenantId);
      await imageStore.setVmImage(t.db, vmId, vmImage);
      await writeFile(path.join(dir, 'step4.qcow2.Ab12Cd.tmp'), 'a copy a crash cut short');

      const all = ['base1', 'step2', 'step3', 'gone3', 'vm1', 'vm2', 'old1', 'recent1', 'other'];
      const r = await collectLayers({ db: t.db, hostId: 'host_a', layersDir: dir, now: new Date() });
      assert.deepEqual(present(all), ['base1', 'step2', 'step3', 'vm1', 'vm2', 'recent1']);
      assert.ok(!existsSync(path.join(dir, 'step4.qcow2.Ab12Cd.tmp')));
      assert.equal(r.removed, 4);
      assert.ok(r.bytes > 0);
      assert.deepEqual(
        (await imageStore.layersOfHost(t.db, 'host_a')).map((l) => l.cache_key.slice(4)).sort(),
        ['base1', 'recent1', 'step2', 'step3', 'vm1', 'vm2'],
        'what was removed is no longer in the step cache',
      );
      assert.equal((await imageStore.layersOfHost(t.db, 'host_b')).length, 1, "another host's cache is its own");
      assert.deepEqual(await chainOf(path.join(dir, 'step3.qcow2')), ['step3', 'step2', 'base1'].map((n) => path.join(dir, `${n}.qcow2`)));

      // The VM goes: its deleted image's layers go at the next run; a second run changes nothing.
      await t.db.query(`UPDATE vms SET deleted_at = now() WHERE vm_id = $1`, [vmId]);
      assert.equal((await collectLayers({ db: t.db, hostId: 'host_a', layersDir: dir, now: new Date() })).removed, 2);
      assert.deepEqual(present(all), ['base1', 'step2', 'step3', 'recent1']);
      assert.equal((await collectLayers({ db: t.db, hostId: 'host_a', layersDir: dir, now: new Date() })).removed, 0);
      // A week on, yesterday's unused step goes too; the image's layers stay.
      await collectLayers({ db: t.db, hostId: 'host_a', layersDir: dir, now: new Date(Date.now() + 7 * DAY) });
      assert.deepEqual(present(all), ['base1', 'step2', 'step3']);
    });

    test('stopped half way (a crash): a forgotten entry whose file stayed, and an entry whose file is gone, are both settled by the next run', async () => {
      layer('orphan');
      layer('lost');
      await cacheRow('lost', 30);
      await rm(path.join(dir, 'lost.qcow2'));
      const r = await collectLayers({ db: t.db, hostId: 'host_a', layersDir: dir, now: new Date() });
      assert.ok(!existsSync(path.join(dir, 'orphan.qcow2')));
      assert.ok(r.removed >= 1);
      assert.ok(!(await imageStore.layersOfHost(t.db, 'host_a')).some((l) => l.cache_key === 'key-lost'));
    });
  });
}
