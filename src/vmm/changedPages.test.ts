import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { changedRuns, encodeHead, PAGE, pageCount, pieces, ramMapping, readHead, readRuns, writeRuns, type Run } from './changedPages.ts';

describe('page files', () => {
  const runs: Run[] = [
    [0, 2],
    [5, 1],
    [9, 3],
  ];
  const data = Buffer.concat(Array.from({ length: pageCount(runs) }, (_, i) => Buffer.alloc(PAGE, i + 1)));
  const stream = Buffer.from('QEVM header, RAM section, devices');
  const withFile = <T,>(bytes: Buffer, fn: (fd: number) => T): T => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'page-file-'));
    try {
      writeFileSync(path.join(dir, 'state'), bytes);
      const fd = openSync(path.join(dir, 'state'), 'r');
      try {
        return fn(fd);
      } finally {
        closeSync(fd);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const file = (r: Run[], tail = stream) => Buffer.concat([encodeHead(r, tail.length), data, tail]);

  test('round trip: the head says where the pages and the stream are', () => {
    const bytes = file(runs);
    const head = withFile(bytes, (fd) => readHead(fd, bytes.length, 16));
    assert.deepEqual(head.runs, runs);
    assert.ok(bytes.subarray(head.dataAt, head.streamAt).equals(data));
    assert.ok(bytes.subarray(head.streamAt, head.streamAt + head.streamBytes).equals(stream));
    assert.equal(head.streamAt + head.streamBytes, bytes.length);
  });

  test('refused: not one, cut short, runs past the RAM, overlapping runs', () => {
    const bytes = file(runs);
    assert.throws(() => withFile(Buffer.from('QEVM....................'), (fd) => readHead(fd, 24, 16)), /not a page file/);
    assert.throws(() => withFile(bytes.subarray(0, bytes.length - 1), (fd) => readHead(fd, bytes.length - 1, 16)), /wrong length/);
    assert.throws(() => withFile(bytes, (fd) => readHead(fd, bytes.length, 11)), /do not fit/);
    const overlapping = file([[0, 2], [1, 1], [9, 3]]);
    assert.throws(() => withFile(overlapping, (fd) => readHead(fd, overlapping.length, 16)), /do not fit/);
  });

  test('pieces: runs cut so that none holds more pages than asked, in order, nothing lost', () => {
    assert.deepEqual(pieces(runs, 2), [[[0, 2]], [[5, 1], [9, 1]], [[10, 2]]]);
    assert.deepEqual(pieces(runs, 100), [runs]);
    assert.deepEqual(pieces([], 4), []);
    const many: Run[] = Array.from({ length: 50 }, (_, i) => [i * 10, 1 + (i % 7)]);
    const cut = pieces(many, 8);
    assert.ok(cut.every((p) => pageCount(p) <= 8));
    assert.equal(cut.flat().reduce((n, [, c]) => n + c, 0), pageCount(many));
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
