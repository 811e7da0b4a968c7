import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { changedRuns, decodePageFile, encodePageFile, PAGE, pageCount, ramMapping, readRuns, writeRuns, type Run } from './changedPages.ts';

describe('page files', () => {
  const runs: Run[] = [
    [0, 2],
    [5, 1],
    [9, 3],
  ];
  const data = Buffer.concat(Array.from({ length: pageCount(runs) }, (_, i) => Buffer.alloc(PAGE, i + 1)));
  const stream = Buffer.from('QEVM header, RAM section, devices');

  test('round trip', () => {
    const file = Buffer.concat(encodePageFile(runs, data, stream));
    const back = decodePageFile(file, 16);
    assert.deepEqual(back.runs, runs);
    assert.ok(back.data.equals(data));
    assert.ok(back.stream.equals(stream));
  });

  test('refused: not one, cut short, runs past the RAM, overlapping runs', () => {
    const file = Buffer.concat(encodePageFile(runs, data, stream));
    assert.throws(() => decodePageFile(Buffer.from('QEVM....................'), 16), /not a page file/);
    assert.throws(() => decodePageFile(file.subarray(0, file.length - 1), 16), /wrong length/);
    assert.throws(() => decodePageFile(file, 11), /do not fit/);
    const overlapping = Buffer.concat(encodePageFile([[0, 2], [1, 1], [9, 3]], data, stream));
    assert.throws(() => decodePageFile(overlapping, 16), /do not fit/);
  });
});

// A real QEMU mapping a memory file copy-on-write (as a clone's RAM is): the pages written into it are
// exactly the ones the page map then calls its own, they read back as written, and the file is untouched.
describe('changed pages of a real QEMU process', () => {
  test('written pages are found and read back; the file stays as it was', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'changed-pages-'));
    const file = path.join(dir, 'mem');
    const bytes = 4 << 20;
    const base = Buffer.alloc(bytes, 0x11);
    await writeFile(file, base);
    const qemu = spawn(
      'qemu-system-x86_64',
      ['-machine', 'none', '-nographic', '-nodefaults', '-S', '-object', `memory-backend-file,id=mem,size=${bytes},mem-path=${file},share=off,prealloc=off`],
      { stdio: 'ignore' },
    );
    try {
      const inode = (await stat(file)).ino;
      let addr: number | null = null;
      for (let i = 0; i < 200 && addr === null; i++) {
        addr = await ramMapping(qemu.pid!, inode, bytes).catch(() => null);
        if (addr === null) await sleep(25);
      }
      assert.notEqual(addr, null, 'the file is mapped whole');
      assert.deepEqual(await changedRuns(qemu.pid!, addr!, bytes / PAGE), [], 'nothing changed yet');
      const written: Run[] = [
        [3, 1],
        [100, 4],
        [1023, 1],
      ];
      const data = Buffer.concat(Array.from({ length: pageCount(written) }, (_, i) => Buffer.alloc(PAGE, 0x40 + i)));
      writeRuns(qemu.pid!, addr!, written, data);
      // Reading the file's pages through the mapping makes them present, still the file's.
      readRuns(qemu.pid!, addr!, [[200, 50]]);
      assert.deepEqual(await changedRuns(qemu.pid!, addr!, bytes / PAGE), written);
      assert.ok((readRuns(qemu.pid!, addr!, written)).equals(data));
      assert.ok((await readFile(file)).equals(base), 'a private mapping leaves the file alone');
      assert.equal(await ramMapping(qemu.pid!, inode + 1, bytes), null, 'another file is not it');
    } finally {
      qemu.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
