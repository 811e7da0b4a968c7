import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checkPageFile, DamagedState } from './suspend.ts';
import { encodeHead, PAGE } from './changedPages.ts';
import { hostBootId, suspendFiles, SUSPEND_FORMAT, type SuspendRecord } from './suspendRecord.ts';

// A page file's check before a start: a hashed one by its SHA-256, a branch's (not hashed) by its size
// and the host's boot it was written in.
test('a page file is checked by its hash, or, a branch\'s, by its size within the boot it was written in', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'suspend-check-'));
  try {
    const f = suspendFiles(dir);
    const bytes = Buffer.concat([encodeHead([[3, 2]], 5), Buffer.alloc(2 * PAGE, 7), Buffer.from('QEVMx')]);
    await writeFile(f.state, bytes);
    const base: SuspendRecord = { format: SUSPEND_FORMAT, kind: 'pages', bytes: bytes.length, sha256: '', named_ram: true, image_id: 'i', vcpus: 1, memory_mib: 1, facts: {}, saved_at: '', save_ms: 0 };
    const ram = 16 * PAGE;
    const sha256 = createHash('sha256').update(bytes).digest('hex');

    assert.deepEqual((await checkPageFile(f, { ...base, sha256 }, ram)).runs, [[3, 2]]);
    assert.deepEqual((await checkPageFile(f, { ...base, boot_id: hostBootId() }, ram)).runs, [[3, 2]]);
    await assert.rejects(checkPageFile(f, { ...base, boot_id: '00000000-0000-0000-0000-000000000000' }, ram), (e: Error) => e instanceof DamagedState && /host restarted/.test(e.message));
    await assert.rejects(checkPageFile(f, { ...base }, ram), (e: Error) => e instanceof DamagedState && /host restarted/.test(e.message));
    await assert.rejects(checkPageFile(f, { ...base, boot_id: hostBootId(), bytes: bytes.length + 1 }, ram), (e: Error) => e instanceof DamagedState && /damaged/.test(e.message));

    bytes[bytes.length - 1] ^= 0xff;
    await writeFile(f.state, bytes);
    await assert.rejects(checkPageFile(f, { ...base, sha256 }, ram), (e: Error) => e instanceof DamagedState && /checksum/.test(e.message));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
