import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, link, rename, rm, stat, utimes, writeFile, open } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isVouched, vouch, VOUCH_MS } from './pageFileVouch.ts';

test('a page file vouched for as it was written is known while unchanged: not after a write, a replacement or its time', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'vouch-'));
  try {
    const file = path.join(dir, 'suspend.state');
    await writeFile(file, Buffer.alloc(8192, 1));
    const sum = 'a'.repeat(64);
    const now = Date.now();
    vouch(await stat(file, { bigint: true }), sum, now);
    assert.ok(isVouched(await stat(file, { bigint: true }), sum, now));
    // Another checksum in the record, or past its time: read again.
    assert.ok(!isVouched(await stat(file, { bigint: true }), 'b'.repeat(64), now));
    assert.ok(!isVouched(await stat(file, { bigint: true }), sum, now + VOUCH_MS));
    // A branch's links share it: still known through each.
    await link(file, path.join(dir, 'child.state'));
    assert.ok(isVouched(await stat(path.join(dir, 'child.state'), { bigint: true }), sum, now));
    // A byte written in place moves its modification time (set here past the clock's tick, as any later write's is).
    const fh = await open(file, 'r+');
    await fh.write(Buffer.from([9]), 0, 1, 100);
    await fh.close();
    const later = new Date(Date.now() + 1000);
    await utimes(file, later, later);
    assert.ok(!isVouched(await stat(file, { bigint: true }), sum, now));
    // A file put in its place with the vouched one's time is another inode.
    const other = path.join(dir, 'other');
    await writeFile(other, Buffer.alloc(8192, 1));
    vouch(await stat(file, { bigint: true }), sum, now);
    const st = await stat(file, { bigint: true });
    await utimes(other, st.atime, st.mtime);
    await rename(other, file);
    assert.ok(!isVouched(await stat(file, { bigint: true }), sum, now));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
