/**
 * A VM's disks over a backing file (an image's layer, a template's disk) are empty qcow2 children of it,
 * each a file of its own, made by qemu-img once per backing and written from those bytes after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DiskMaker, emptyTopOver, UPPER_GIB } from './disks.ts';
import { machineFiles } from './machine.ts';

const info = (file: string) => JSON.parse(execFileSync('qemu-img', ['info', '-U', '--output=json', file], { encoding: 'utf8' })) as Record<string, unknown>;

test('disks over a backing file: children of it of their own size, one file each, valid for qemu-img', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-disks-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const layer = path.join(dir, 'layer.qcow2');
  const template = path.join(dir, 'template.qcow2');
  execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', layer, '1G']);
  execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', template, '2G']);
  const disks = new DiskMaker(path.join(dir, 'blank'));
  const [a, b] = [machineFiles(path.join(dir, 'vm_a')), machineFiles(path.join(dir, 'vm_b'))];
  await disks.prepare(a, { diskGib: 2, persistBacking: template, upperBacking: layer }, true);
  await disks.prepare(b, { diskGib: 2, persistBacking: template, upperBacking: layer }, true);
  for (const f of [a, b]) {
    const upper = info(f.upper);
    assert.equal(upper['backing-filename'], layer);
    assert.equal(upper['virtual-size'], UPPER_GIB * 1024 ** 3);
    const persist = info(f.persist);
    assert.equal(persist['backing-filename'], template);
    assert.equal(persist['virtual-size'], 2 * 1024 ** 3);
    execFileSync('qemu-img', ['check', '-q', f.upper]);
  }
  assert.notEqual((await stat(a.upper)).ino, (await stat(b.upper)).ino, 'each VM has a file of its own');
  // A backing that is not there is an error, not a disk.
  const c = machineFiles(path.join(dir, 'vm_c'));
  await assert.rejects(disks.prepare(c, { diskGib: 2, upperBacking: path.join(dir, 'missing.qcow2') }, true));
});

test("an empty top over a snapshot's layer is qemu-img's image with the layer's name in its header: whole, of the size asked", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-tops-'));
  try {
    for (const [name, size] of [['layer-snap_aaaaaaaaaaaaaaaaaaaaaa-upper.qcow2', 8 * 1024 ** 3], ['layer-snap_bbbbbbbbbbbbbbbbbbbbbb-upper.qcow2', 8 * 1024 ** 3], ['layer-snap_c-persist.qcow2', 10 * 1024 ** 3]] as const) {
      execFileSync('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(dir, name), String(size)]);
      const file = path.join(dir, `top-${name}`);
      await writeFile(file, await emptyTopOver(name, size, dir));
      const got = info(file);
      assert.equal(got['backing-filename'], name);
      assert.equal(got['virtual-size'], size);
      execFileSync('qemu-img', ['check', '-q', file]);
    }
    assert.deepEqual((await readdir(dir)).filter((n) => !/^(top-)?layer-/.test(n)), [], 'nothing else is left');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
