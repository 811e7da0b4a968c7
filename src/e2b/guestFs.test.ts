/**
 * The Perl programs of E2B's files in a guest (guestFs.ts, files.ts), run on this machine as the guest
 * runs them: a file's metadata as its `user.e2b.*` extended attributes, written with a file, cleared by
 * a write without, kept by a move, listed with its directory; the metadata headers of an upload. The
 * same through E2B's SDK on a real VM: test/e2b.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { FS_PROGRAM, parseMetadata } from './guestFs.ts';
import { metadataOf, WRITE_PROGRAM } from './files.ts';

const hex = (args: string[]) => args.map((a) => Buffer.from(a).toString('hex'));
/** The entries FS_PROGRAM answers, by name: their metadata. */
function fs(...args: string[]): { code: number | null; meta: Record<string, Record<string, string> | null>; err: string } {
  const r = spawnSync('perl', ['-e', FS_PROGRAM, ...hex(args)], { encoding: 'utf8' });
  const meta: Record<string, Record<string, string> | null> = {};
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const f = line.split('\t');
    meta[Buffer.from(f[0], 'hex').toString()] = parseMetadata(f[9]);
  }
  return { code: r.status, meta, err: r.stderr };
}
const write = (file: string, bytes: string, kv: string[] = []) => spawnSync('perl', ['-e', WRITE_PROGRAM, ...hex([file, '', ...kv])], { input: bytes, encoding: 'utf8' });

test("a file's metadata: written with it, replaced by the next write, kept by a move, listed; a link has none", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'agentvm-meta-'));
  try {
    const file = path.join(dir, 'new', 'deeper', 'a.txt');
    const first = write(file, 'one', ['author', 'mish', 'purpose', 'up load']);
    if (first.status !== 0 && /not supported/i.test(first.stderr)) return t.skip(`${os.tmpdir()} keeps no user extended attributes`);
    assert.equal(first.status, 0, first.stderr);
    assert.equal(await readFile(file, 'utf8'), 'one');
    assert.deepEqual(fs('stat', file).meta, { 'a.txt': { author: 'mish', purpose: 'up load' } });
    // A write without metadata leaves none of the old; the same file (a hard link sees the bytes).
    const second = write(file, 'two');
    assert.equal(second.status, 0, second.stderr);
    assert.deepEqual(fs('stat', file).meta, { 'a.txt': null });
    assert.equal(fs('setmeta', file, 'stage', 'renamed').code, 0);
    const moved = path.join(dir, 'b.txt');
    assert.deepEqual(fs('move', file, moved).meta, { 'b.txt': { stage: 'renamed' } });
    await writeFile(path.join(dir, 'plain'), '');
    await symlink(moved, path.join(dir, 'link'));
    assert.deepEqual(fs('list', dir).meta, { 'b.txt': { stage: 'renamed' }, link: null, new: null, plain: null });
    assert.equal(fs('setmeta', path.join(dir, 'missing'), 'a', 'b').code, 2, 'not found');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("an upload's metadata headers: keys as sent, HTTP tokens; values printable US-ASCII", () => {
  assert.deepEqual(metadataOf(['Content-Type', 'text/plain', 'x-metadata-author', 'mish', 'X-Metadata-Stage', 'one two']), { author: 'mish', Stage: 'one two' });
  assert.deepEqual(metadataOf([]), {});
  assert.match(metadataOf(['x-metadata-', 'v']) as string, /not an HTTP token/);
  assert.match(metadataOf(['x-metadata-bad(key)', 'v']) as string, /not an HTTP token/);
  assert.match(metadataOf(['x-metadata-good', 'caf\u00e9']) as string, /printable US-ASCII/);
});
