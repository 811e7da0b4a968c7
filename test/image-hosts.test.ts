/**
 * Image builds across VM hosts, on the real store: a host takes only the queued builds it can make
 * (FROM base, or FROM an image whose layers it holds), and a build whose host stopped answering never
 * stays `building` — it is queued again when a live host holds what it is FROM, else it fails saying
 * why; the silent host, back, cannot then mark it ready or failed.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, createTestApp, type TestApp } from './helpers.ts';
import * as imageStore from '../src/store/images.ts';
import { newId, sha256Hex } from '../src/domain/ids.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ImageBuilder } from '../src/host/imageBuilder.ts';
import { QemuDriver } from '../src/vmm/qemu.ts';
import { BASE_CONFIG } from '../src/domain/images.ts';
import { ImageFeed } from '../src/feeds/feed.ts';
import { configAfter } from '../src/domain/dockerfile.ts';
import { createLogger } from '../src/log.ts';
import type { Image } from '../src/image/build.ts';

for (const backend of backends()) {
  describe(`image builds on several hosts, on ${backend.name}`, () => {
    let t: TestApp;
    let tenantId: string;
    before(async () => {
      t = await createTestApp(backend);
      tenantId = (await t.tenant()).tenantId;
      for (const host_id of ['host_a', 'host_b']) {
        await t.services.hosts.register({ host_id, name: host_id, accel: 'tcg', vcpus_total: 2, memory_mib_total: 4096, disk_gib_total: 40, internal_url: null, image_id: 'img_guest' });
      }
    });
    after(async () => t?.close());

    const queue = async (parent = 'base') => {
      const image_id = newId('img');
      await imageStore.insertQueued(t.db, { image_id, tenant_id: tenantId, name: image_id, slug: image_id.toLowerCase(), visibility: 'private', parent, dockerfile: `FROM ${parent}`, context: {}, egress: { mode: 'none', allow: [] }, created_at: new Date() });
      return image_id;
    };
    const ready = { layerPath: '/layers/x.qcow2', sizeBytes: 1, config: { env: {}, workdir: '', user: '' }, packages: [] };
    const status = async (id: string) => (await imageStore.byId(t.db, id))!;

    test("a host takes the builds FROM base or FROM its own images, not FROM another host's", async () => {
      const parent = await queue();
      assert.equal((await imageStore.claimQueued(t.db, 'host_a'))?.image_id, parent);
      assert.ok(await imageStore.markReady(t.db, parent, ready, new Date(), 'host_a'));
      const child = await queue(parent);
      assert.equal(await imageStore.claimQueued(t.db, 'host_b'), undefined, "host_b has not the parent's layers");
      assert.equal((await imageStore.claimQueued(t.db, 'host_a'))?.image_id, child);
      assert.ok(await imageStore.markReady(t.db, child, ready, new Date(), 'host_a'));
    });

    test('the builds of a host silent too long: queued again, or failed when what they are FROM went with it; the host back cannot end them', async () => {
      const fromBase = await queue();
      assert.equal((await imageStore.claimQueued(t.db, 'host_a'))?.image_id, fromBase);
      const parent = (await t.db.query<{ image_id: string }>(`SELECT image_id FROM images WHERE status = 'ready' AND parent = 'base' LIMIT 1`))[0].image_id;
      const fromItsImage = await queue(parent);
      assert.equal((await imageStore.claimQueued(t.db, 'host_a'))?.image_id, fromItsImage);
      const since = new Date(Date.now() - 600_000);
      assert.deepEqual(await imageStore.takeOverLost(t.db, since), { requeued: [], failed: [] }, 'host_a answers: nothing is taken');

      await t.db.query(`UPDATE hosts SET heartbeat_at = now() - interval '11 minutes' WHERE host_id = 'host_a'`);
      const taken = await imageStore.takeOverLost(t.db, since);
      assert.deepEqual(taken, { requeued: [fromBase], failed: [fromItsImage] });
      assert.equal((await status(fromBase)).status, 'queued');
      assert.equal((await status(fromItsImage)).status, 'failed');
      assert.match((await status(fromItsImage)).status_reason!, /its host host_a stopped answering while building it, and the image it is FROM is on that host alone/);
      assert.equal((await imageStore.claimQueued(t.db, 'host_b'))?.image_id, fromBase, 'another host builds it');

      // host_a comes back and finishes what it had: the builds are no longer its own.
      assert.equal(await imageStore.markReady(t.db, fromBase, ready, new Date(), 'host_a'), false);
      await imageStore.markFailed(t.db, fromBase, 'late', 'host_a');
      assert.equal((await status(fromBase)).status, 'building');
      assert.equal((await status(fromBase)).host_id, 'host_b');
      assert.ok(await imageStore.markReady(t.db, fromBase, ready, new Date(), 'host_b'));
    });

    test('a build queued at any moment of the host\'s loop is taken: right after another ends, while the host tidies its layers', async () => {
      // Builds of `FROM base` whose one layer (the image's config) is cached: no VM is needed, each takes milliseconds.
      const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-builder-'));
      const guest = { id: 'img_guest' } as Image;
      const layer = path.join(dir, 'layers', 'config.qcow2');
      await promisify(execFile)('mkdir', ['-p', path.dirname(layer)]);
      await promisify(execFile)('qemu-img', ['create', '-q', '-f', 'qcow2', layer, '1M']);
      const configKey = sha256Hex(`base:${guest.id}\nCONFIG ${JSON.stringify(configAfter(BASE_CONFIG, []))}`);
      await imageStore.saveLayer(t.db, 'host_c', configKey, layer, 1, new Date());
      await t.services.hosts.register({ host_id: 'host_c', name: 'host_c', accel: 'tcg', vcpus_total: 2, memory_mib_total: 4096, disk_gib_total: 40, internal_url: null, image_id: guest.id });
      const driver = new QemuDriver({ vmsDir: path.join(dir, 'vms'), blankDir: path.join(dir, 'blank'), snapshots: null, qemu: 'qemu-system-x86_64', accel: 'tcg', gateway: null, bootTimeoutMs: 1000 });
      const feed = new ImageFeed(t.db);
      const builder = new ImageBuilder({
        db: t.db, clock: t.services.clock, driver, gateway: null, hostId: 'host_c', layersDir: path.dirname(layer), buildDir: path.join(dir, 'builds'),
        feed, log: createLogger('error'), image: () => guest,
      });
      try {
        await builder.start();
        for (let i = 0; i < 8; i++) {
          const id = await queue();
          builder.kick(); // as the host does when the feed says a build was queued
          const deadline = Date.now() + 15_000;
          let row = await status(id);
          while (row.status !== 'ready' && Date.now() < deadline) {
            await new Promise((r) => setImmediate(r));
            row = await status(id);
          }
          assert.equal(row.status, 'ready', `build ${i + 1} of 8: ${row.status} ${row.status_reason ?? ''}`);
        }
      } finally {
        await builder.close();
        await feed.close();
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
}
