import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { branchMarkOf, checkSnapshot, mendFrozenDisks, prepareFromSnapshot, recordPath, type SnapshotRecord } from './branch.ts';
import { readRecord, suspendFiles } from './suspendRecord.ts';

const run = promisify(execFile);
const qemuImg = (...args: string[]) => run('qemu-img', args);

/**
 * A snapshot's directory as takeSnapshot leaves it, made of real qcow2 layers: an older snapshot's
 * layer under this one's (a chain through bare names), saved memory, its base and its record.
 */
async function makeSnapshot(root: string, id: string): Promise<string> {
  const dir = path.join(root, id);
  await mkdir(dir, { recursive: true });
  const files: SnapshotRecord['files'] = {};
  for (const disk of ['upper', 'persist']) {
    const size = disk === 'upper' ? '8G' : '10G';
    await qemuImg('create', '-q', '-f', 'qcow2', path.join(dir, `layer-snap_older-${disk}.qcow2`), size);
    await qemuImg('create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-u', '-b', `layer-snap_older-${disk}.qcow2`, path.join(dir, `layer-${id}-${disk}.qcow2`), size);
  }
  await writeFile(path.join(dir, 'suspend.state'), Buffer.alloc(64 * 1024, 7));
  await writeFile(path.join(dir, 'ram.prefix'), 'prefix');
  await writeFile(path.join(dir, 'ram.base'), Buffer.alloc(1 << 20));
  const { createHash } = await import('node:crypto');
  for (const name of ['suspend.state', 'ram.prefix', ...['upper', 'persist'].flatMap((d) => [`layer-snap_older-${d}.qcow2`, `layer-${id}-${d}.qcow2`])]) {
    const b = await readFile(path.join(dir, name));
    files[name] = { bytes: b.length, sha256: createHash('sha256').update(b).digest('hex') };
  }
  const memory = { format: 1, kind: 'pages' as const, bytes: 64 * 1024, sha256: files['suspend.state'].sha256!, named_ram: true, image_id: 'img', vcpus: 1, memory_mib: 1024, facts: {}, base_bytes: 1 << 20, saved_at: '', save_ms: 1 };
  const record: SnapshotRecord = { format: 1, snapshot_id: id, memory, files, base_bytes: 1 << 20, runs: ['run_inflight'], paused_ms: 12, taken_at: '' };
  await writeFile(recordPath(dir), JSON.stringify(record));
  return dir;
}

describe('snapshots on disk (branch.ts)', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'agentvm-branch-unit-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  test('a VM made from a snapshot is a suspended VM: its own top layers over the frozen chain, linked into its directory, the memory shared', async () => {
    const snap = await makeSnapshot(root, 'snap_a');
    const vmDir = path.join(root, 'vms', 'vm_child');
    await prepareFromSnapshot(snap, vmDir);
    for (const disk of ['upper', 'persist']) {
      const { stdout } = await run('qemu-img', ['info', '-U', '--backing-chain', '--output=json', path.join(vmDir, `${disk}.qcow2`)]);
      const chain = JSON.parse(stdout) as { filename: string; 'virtual-size': number }[];
      // Every layer is opened from the VM's own directory.
      assert.deepEqual(chain.map((c) => path.relative(vmDir, c.filename)), [`${disk}.qcow2`, `layer-snap_a-${disk}.qcow2`, `layer-snap_older-${disk}.qcow2`]);
      assert.equal(chain[0]['virtual-size'], (disk === 'upper' ? 8 : 10) * 1024 ** 3);
      // The frozen layers are the snapshot's files (links), not copies.
      assert.equal((await stat(path.join(vmDir, `layer-snap_a-${disk}.qcow2`))).ino, (await stat(path.join(snap, `layer-snap_a-${disk}.qcow2`))).ino);
    }
    const sf = suspendFiles(vmDir);
    assert.equal((await stat(sf.base)).ino, (await stat(path.join(snap, 'ram.base'))).ino);
    assert.equal((await stat(sf.state)).ino, (await stat(path.join(snap, 'suspend.state'))).ino);
    const record = await readRecord(sf);
    assert.ok(record, 'its saved memory has a record');
    assert.equal(record!.base_bytes, 1 << 20);
    assert.deepEqual(branchMarkOf(record), { snapshot_id: 'snap_a', runs: ['run_inflight'] });
    // A VM's own suspend is no branch.
    assert.equal(branchMarkOf({ ...record!, branch: undefined } as never), null);
    // The snapshot goes; the VM keeps what it needs.
    await rm(snap, { recursive: true });
    const { stdout } = await run('qemu-img', ['info', '-U', '--backing-chain', '--output=json', path.join(vmDir, 'persist.qcow2')]);
    assert.equal((JSON.parse(stdout) as unknown[]).length, 3);
  });

  test('a snapshot is checked file by file: a changed byte, a missing file or a base of another size is named', async () => {
    const snap = await makeSnapshot(root, 'snap_b');
    assert.equal(await checkSnapshot(snap), null);
    const fh = await open(path.join(snap, 'suspend.state'), 'r+');
    await fh.write(Buffer.from([1]), 0, 1, 1000);
    await fh.close();
    assert.match((await checkSnapshot(snap)) ?? '', /suspend\.state is damaged/);

    const other = await makeSnapshot(root, 'snap_c');
    await rm(path.join(other, 'layer-snap_older-persist.qcow2'));
    assert.match((await checkSnapshot(other)) ?? '', /layer-snap_older-persist\.qcow2 is missing/);

    const third = await makeSnapshot(root, 'snap_d');
    await writeFile(path.join(third, 'ram.base'), 'short');
    assert.match((await checkSnapshot(third)) ?? '', /memory the snapshot is a difference over is 5 bytes/);
    await rm(recordPath(third));
    assert.match((await checkSnapshot(third)) ?? '', /no complete record/);
    await assert.rejects(prepareFromSnapshot(third, path.join(root, 'vms', 'vm_none')), /no complete record/);
  });

  test('a freeze a kill cut short is finished at the next host start: a next top QEMU took, or any with no QEMU left, is the disk; one it did not take goes', async () => {
    const vmDir = path.join(root, 'vms', 'vm_cut');
    await mkdir(vmDir, { recursive: true });
    const chainOf = async (disk: string) => {
      const { stdout } = await run('qemu-img', ['info', '-U', '--backing-chain', '--output=json', path.join(vmDir, `${disk}.qcow2`)]);
      return (JSON.parse(stdout) as { filename: string }[]).map((c) => path.basename(c.filename));
    };
    const ino = async (name: string) => (await stat(path.join(vmDir, name))).ino;
    /** A disk whose freeze was cut after its next top was made over its frozen layer's link. */
    const cutAfterNext = async (disk: string) => {
      await qemuImg('create', '-q', '-f', 'qcow2', path.join(vmDir, `${disk}.qcow2`), '1G');
      await run('ln', [path.join(vmDir, `${disk}.qcow2`), path.join(vmDir, `layer-snap_cut-${disk}.qcow2`)]);
      await qemuImg('create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-u', '-b', `layer-snap_cut-${disk}.qcow2`, path.join(vmDir, `${disk}.next-snap_cut.qcow2`), '1G');
      return ino(`${disk}.qcow2`);
    };

    // No QEMU left: upper cut after its next top was made (taken or not, it is the disk); persist cut
    // after the link, its next top half made.
    const upperWas = await cutAfterNext('upper');
    await qemuImg('create', '-q', '-f', 'qcow2', path.join(vmDir, 'persist.qcow2'), '1G');
    await run('ln', [path.join(vmDir, 'persist.qcow2'), path.join(vmDir, 'layer-snap_cut-persist.qcow2')]);
    await writeFile(path.join(vmDir, 'persist.next-snap_cut.qcow2.tmp'), 'half');
    await mendFrozenDisks(vmDir, false);
    assert.deepEqual(await chainOf('upper'), ['upper.qcow2', 'layer-snap_cut-upper.qcow2'], 'the next top is the disk, over what the VM wrote');
    assert.equal(await ino('layer-snap_cut-upper.qcow2'), upperWas);
    assert.equal(await ino('upper.next-snap_cut.qcow2'), await ino('upper.qcow2'), 'it keeps its own name too');
    assert.deepEqual(await chainOf('persist'), ['persist.qcow2'], 'the disk alone, as before the freeze');
    const left = ['layer-snap_cut-upper.qcow2', 'persist.qcow2', 'upper.next-snap_cut.qcow2', 'upper.qcow2'];
    assert.deepEqual((await readdir(vmDir)).sort(), left);
    await mendFrozenDisks(vmDir, false);
    assert.deepEqual((await readdir(vmDir)).sort(), left, 'a second start finds nothing to mend');

    // A QEMU runs on: a next top it did not take goes, with the layer's link (still its disk); one it
    // took (it holds its write lock) is the disk.
    await rm(vmDir, { recursive: true });
    await mkdir(vmDir);
    const persistWas = await cutAfterNext('persist');
    await cutAfterNext('upper');
    const qemu = spawn('qemu-system-x86_64', ['-machine', 'none', '-nographic', '-monitor', 'none', '-serial', 'none', '-drive', `if=none,id=u,format=qcow2,file=${path.join(vmDir, 'upper.next-snap_cut.qcow2')}`], { stdio: 'ignore' });
    try {
      // Open once it holds the lock (qemu-img then refuses it).
      for (let i = 0; i < 200 && (await run('qemu-img', ['info', '-f', 'qcow2', path.join(vmDir, 'upper.next-snap_cut.qcow2')]).then(() => true, () => false)); i++) await new Promise((r) => setTimeout(r, 50));
      await mendFrozenDisks(vmDir, true);
    } finally {
      qemu.kill('SIGKILL');
    }
    assert.equal(await ino('persist.qcow2'), persistWas, 'persist: the file QEMU writes');
    assert.equal(await ino('upper.qcow2'), await ino('upper.next-snap_cut.qcow2'), 'upper: the top QEMU took');
    assert.deepEqual((await readdir(vmDir)).sort(), ['layer-snap_cut-upper.qcow2', 'persist.qcow2', 'upper.next-snap_cut.qcow2', 'upper.qcow2']);

    // A root made fresh since (a restart): the old top's other name is no freeze cut short; it goes,
    // and the fresh root stays the disk.
    await rm(path.join(vmDir, 'upper.qcow2'));
    await qemuImg('create', '-q', '-f', 'qcow2', path.join(vmDir, 'upper.qcow2'), '1G');
    const fresh = await ino('upper.qcow2');
    await mendFrozenDisks(vmDir, false);
    assert.equal(await ino('upper.qcow2'), fresh);
    assert.deepEqual((await readdir(vmDir)).sort(), ['layer-snap_cut-upper.qcow2', 'persist.qcow2', 'upper.qcow2']);
  });
});
