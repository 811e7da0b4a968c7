/**
 * Snapshots of a running machine, and VMs made from them (decisions section 18). It knows nothing of
 * tenants or money.
 *
 * A snapshot is taken with the machine paused (QMP `stop`): its disks are frozen first, then its
 * memory and devices saved exactly as a suspend saves them (suspend.ts: a page file over the memory
 * its RAM is mapped from, else QEMU's migration stream), then it runs on (`cont`). Its pause is what
 * the caller reports as `paused_ms`.
 *
 * Freezing a disk: before the pause the file QEMU writes takes the name `layer-<snapshot>-<disk>.qcow2`
 * too (a hard link) and a new, empty qcow2 layer is made naming it as its backing by that bare name
 * (relative, so resolved in the directory of whoever opens it); in the pause QEMU puts that layer on
 * top of the disk (`blockdev-snapshot-sync`, an existing file), so the file it wrote until now is
 * written no more, and the new layer takes the disk's usual name. Every layer of a chain is linked,
 * under its one name, into each directory whose disks stand on it: a VM's directory holds the whole
 * chain of its disks, and a QEMU (of its own user, isolation.ts) never opens a file outside its
 * directory and the shared images.
 * Layers are the host's (root, 0644): many QEMUs read them, none writes them.
 *
 * A VM made from a snapshot is a suspended VM whose memory is the snapshot's: its directory gets the
 * snapshot's layers (links), a new top layer for each disk (a copy of the empty one the snapshot
 * keeps), the saved memory (links: shared, never copied) and a suspend record marked `branch`, so its
 * first start is a resume (the driver gives it a new identity then, as a clone gets one, and ends
 * the runs that were in flight).
 *
 * Only once every file is on disk and hashed does `snapshot.json` appear, and the work directory
 * take the snapshot's name (rename): a snapshot cut short at any moment leaves nothing a start trusts.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, chown, copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { emptyTopOver, forgetNextTops, NEXT_TOP, nextTopName, placeTopLike, qcow2Size, runQemuImg } from './disks.ts';
import { isolating, sealedSource } from './isolation.ts';
import { save, savePages } from './suspend.ts';
import { suspendFiles, type SuspendRecord } from './suspendRecord.ts';

const FORMAT = 1;
const DISKS = ['upper', 'persist'] as const;
/** A frozen layer's file name (the same in every directory that holds it). */
export const LAYER_FILE = /^layer-[A-Za-z0-9_]+-(upper|persist)\.qcow2$/;
const layerName = (snapshotId: string, disk: (typeof DISKS)[number]) => `layer-${snapshotId}-${disk}.qcow2`;

type Qmp = <T = unknown>(command: string, args?: object) => Promise<T>;

/** What a snapshot needs of its running machine. */
export interface RunningMachine {
  pid: number;
  qmp: Qmp;
  /** Flushes what the guest has not written yet to its disks (before the pause). */
  sync(): Promise<void>;
  /** What the guest said of itself when it started (a resume answers them). */
  facts: unknown;
}

/**
 * The files of a snapshot, each checked by its size and SHA-256 (the RAM base by its size). A branch's
 * snapshot, made for its VMs at once and gone after, is not hashed: its files have sizes only.
 */
export interface SnapshotRecord {
  format: number;
  snapshot_id: string;
  memory: SuspendRecord;
  files: Record<string, { bytes: number; sha256?: string }>;
  base_bytes: number | null;
  /** Runs in flight at the instant: they stay with the VM it was taken of; a VM made from it ends them. */
  runs: string[];
  paused_ms: number;
  taken_at: string;
}

/** How a VM made from a snapshot starts: its suspend record says so (the driver gives it a new identity). */
export interface BranchMark {
  snapshot_id: string;
  runs: string[];
}

export const recordPath = (snapDir: string) => path.join(snapDir, 'snapshot.json');

/** The RAM file the running machine maps copy-on-write (a golden memory, or its own base), if any. */
async function mappedRam(cmdline: string, pid: number, vmDir: string): Promise<{ file: string; mapIno?: number } | null> {
  const mem = /(?:^|\0)memory-backend-file,id=mem,[^\0]*mem-path=([^,\0]+),share=off/.exec(cmdline)?.[1];
  if (!mem) return null;
  if (mem !== '/proc/self/fd/3') return { file: mem };
  const sealed = await sealedSource(pid);
  if (!sealed) return null;
  // A sealed copy names the file it copies: trusted only when it is a golden memory or this VM's base.
  const own = path.resolve(sealed.file) === path.resolve(path.join(vmDir, 'ram.base'));
  return own || path.basename(sealed.file) === 'mem' ? { file: sealed.file, mapIno: sealed.ino } : null;
}

async function syncFile(file: string): Promise<void> {
  const fd = await open(file, 'r');
  await fd.sync().catch(() => undefined);
  await fd.close();
}

async function hashFile(file: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  await pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), async function* (src: AsyncIterable<Buffer>) {
    for await (const chunk of src) {
      hash.update(chunk);
      bytes += chunk.length;
    }
  });
  return { bytes, sha256: hash.digest('hex') };
}

/** An empty top over a snapshot's frozen layer, as the snapshot keeps it for the VMs made from it. */
const topName = (disk: string) => `top-${disk}.qcow2`;

/**
 * Before the pause, for each disk: the file QEMU writes gets the frozen layer's name too (a link), and
 * the disk's next top is made over that name (a bare name: resolved in the directory of whoever opens
 * it), with a copy kept for the VMs made from the snapshot. Nothing of the VM's changes yet.
 */
async function prepareFreeze(vmDir: string, work: string, snapshotId: string): Promise<void> {
  await Promise.all(
    DISKS.map(async (disk) => {
      const active = path.join(vmDir, `${disk}.qcow2`);
      const layer = layerName(snapshotId, disk);
      const next = path.join(vmDir, nextTopName(disk, snapshotId));
      await rm(path.join(vmDir, layer), { force: true });
      await link(active, path.join(vmDir, layer));
      const top = await emptyTopOver(layer, await qcow2Size(active), work);
      await writeFile(path.join(work, topName(disk)), top, { mode: 0o600 });
      await placeTopLike(active, next, top);
    }),
  );
}

/** Makes `file` the disk `disk` of the VM (a link: the file keeps its own name too). */
async function becomeDisk(vmDir: string, disk: string, file: string): Promise<void> {
  const swap = path.join(vmDir, `${disk}.qcow2.swap`);
  await rm(swap, { force: true });
  await link(file, swap);
  await rename(swap, path.join(vmDir, `${disk}.qcow2`));
}

/**
 * Freezes the paused machine's disks (see the top of this file): QEMU takes each next top as the
 * disk's active image (its old one becomes the backing, as the next top's header names it), and the
 * next top becomes the disk's usual name. Between any two steps the VM's files are whole for a later
 * start (mendFrozenDisks finishes what a kill cut short).
 *
 * The next top keeps its own name too, until the next freeze: QEMU names an image by the path it
 * opened, and when an image becomes a backing it opens that path again, read-only, to let go of its
 * write lock (the file's `auto-read-only`). The path must still be that file then: renamed away, QEMU
 * kept writing rights on a frozen layer and every VM made from it was refused it; a fixed name,
 * reused, made QEMU take the newest top for a layer under it.
 */
async function freezeDisks(qmp: Qmp, vmDir: string, work: string, snapshotId: string, switched: Set<string>): Promise<void> {
  for (const disk of DISKS) {
    const next = path.join(vmDir, nextTopName(disk, snapshotId));
    // QEMU's node names are at most 31 characters.
    const node = `${disk}-${snapshotId.slice(-16)}`.replace(/[^A-Za-z0-9_-]/g, '-');
    await qmp('blockdev-snapshot-sync', { device: disk, 'snapshot-file': next, 'snapshot-node-name': node, format: 'qcow2', mode: 'existing' });
    switched.add(disk);
    await becomeDisk(vmDir, disk, next);
    // The name of the top before, now read-only in QEMU, is no longer needed.
    await forgetNextTops(vmDir, disk, path.basename(next));
    await link(path.join(vmDir, layerName(snapshotId, disk)), path.join(work, layerName(snapshotId, disk)));
  }
  // The layers under them (earlier snapshots'), so the snapshot's chain is whole in its directory.
  for (const name of await readdir(vmDir)) {
    if (LAYER_FILE.test(name) && !name.startsWith(`layer-${snapshotId}-`)) await link(path.join(vmDir, name), path.join(work, name)).catch(() => undefined);
  }
}

/** Takes back a freeze that failed in this process: the disks QEMU did not switch keep their files alone. */
async function undoFreeze(vmDir: string, snapshotId: string, switched: Set<string>): Promise<void> {
  for (const disk of DISKS.filter((d) => !switched.has(d))) {
    const next = path.join(vmDir, nextTopName(disk, snapshotId));
    await rm(`${next}.tmp`, { force: true });
    await rm(next, { force: true });
    await rm(path.join(vmDir, layerName(snapshotId, disk)), { force: true });
  }
}

/** Whether a running QEMU writes the image (it holds its write lock). */
async function writtenByQemu(file: string): Promise<boolean> {
  // qemu-img info opens no backing file: the image's own lock alone.
  return runQemuImg(['info', '-f', 'qcow2', file]).then(
    () => false,
    (err: Error) => /lock/i.test(err.message),
  );
}

/**
 * Finishes, in a VM's directory, a freeze a kill cut short (a host start does this before it adopts or
 * starts the VM; `qemuRuns`: the VM's QEMU outlived the kill). A next top that is not the disk yet:
 * - QEMU took it (it holds its write lock): it is the disk;
 * - the QEMU runs and did not take it: it goes, with the frozen layer's link (still the disk itself);
 * - no QEMU runs: it becomes the disk either way. Over a layer QEMU no longer wrote, it is the disk;
 *   over the file QEMU wrote to its end, it is empty and the disk reads the same.
 * A next top whose layer is not the disk any more names a disk since replaced (a fresh root): it goes.
 * Half-made next tops and swaps go, and so does a frozen layer's link that is still the disk itself.
 */
export async function mendFrozenDisks(vmDir: string, qemuRuns: boolean): Promise<void> {
  const names = await readdir(vmDir).catch(() => [] as string[]);
  for (const name of names.filter((n) => (n.endsWith('.tmp') && NEXT_TOP.test(n.slice(0, -4))) || n.endsWith('.qcow2.swap'))) await rm(path.join(vmDir, name), { force: true });
  for (const disk of DISKS) {
    const diskFile = path.join(vmDir, `${disk}.qcow2`);
    const active = await stat(diskFile).catch(() => null);
    if (!active) continue;
    for (const name of names.filter((n) => NEXT_TOP.test(n) && n.startsWith(`${disk}.`))) {
      const file = path.join(vmDir, name);
      const st = await stat(file).catch(() => null);
      if (!st || st.ino === active.ino) continue; // the disk's own other name (freezeDisks)
      // Cut short only while the disk is still the layer the next top was made over; else the name
      // of a disk since replaced (a fresh root), which goes.
      const layer = await stat(path.join(vmDir, layerName(NEXT_TOP.exec(name)![2], disk))).catch(() => null);
      if (layer?.ino !== active.ino) await rm(file, { force: true });
      else if (!qemuRuns || (await writtenByQemu(file))) await becomeDisk(vmDir, disk, file);
      else await rm(file, { force: true });
    }
    const now = await stat(diskFile);
    for (const name of names.filter((n) => LAYER_FILE.test(n) && n.endsWith(`-${disk}.qcow2`))) {
      const st = await stat(path.join(vmDir, name)).catch(() => null);
      if (st?.ino === now.ino && st.dev === now.dev) await rm(path.join(vmDir, name), { force: true });
    }
  }
}

/**
 * Takes a snapshot of the running machine into `snapDir` (made whole, or not at all). The machine is
 * paused from before its disks are frozen until its memory is saved, then runs on, whatever happens.
 */
export async function takeSnapshot(
  m: RunningMachine,
  o: { vmDir: string; snapDir: string; snapshotId: string; machine: { image_id: string; vcpus: number; memory_mib: number }; runs: string[]; hashed: boolean },
): Promise<{ record: SnapshotRecord; size_bytes: number; phases: Record<string, number> }> {
  const work = `${o.snapDir}.work`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true, mode: 0o700 });
  const ownBase = path.join(o.vmDir, 'ram.base');
  let paused = false;
  let pausedMs = 0;
  const switched = new Set<string>();
  try {
    const cmdline = await readFile(`/proc/${m.pid}/cmdline`, 'utf8').catch(() => '');
    const ram = await mappedRam(cmdline, m.pid, o.vmDir);
    // What QEMU (its own user) writes goes through its own directory: the stream's socket, its devices.
    const sf = { ...suspendFiles(work), socket: path.join(o.vmDir, 'branch.sock'), devices: path.join(o.vmDir, 'branch.devices') };
    if (ram) {
      await link(ram.file, sf.base);
      // Over the VM's own base, its golden stream's head is kept beside it (suspendRecord.ts prefixFor).
      if (path.resolve(ram.file) === path.resolve(ownBase)) await link(path.join(o.vmDir, 'ram.prefix'), sf.prefix).catch(() => undefined);
    }
    // Each step's milliseconds, for the host's log.
    const phases: Record<string, number> = {};
    let tp = performance.now();
    const phase = (name: string) => {
      phases[`${name}_ms`] = Math.round(performance.now() - tp);
      tp = performance.now();
    };
    await prepareFreeze(o.vmDir, work, o.snapshotId);
    phase('prepare');
    // A kept snapshot's disks are whole on their own too (its memory may one day not load: another
    // machine shape, a newer QEMU). A branch's VMs resume its memory at once: no need, and it cost
    // the branch 120–170 ms under TCG.
    if (o.hashed) await m.sync().catch(() => undefined);
    phase('sync');
    const t0 = performance.now();
    await m.qmp('stop');
    paused = true;
    await freezeDisks(m.qmp, o.vmDir, work, o.snapshotId, switched);
    phase('freeze');
    const about = { named_ram: cmdline.includes('memory-backend=mem'), image_id: o.machine.image_id, vcpus: o.machine.vcpus, memory_mib: o.machine.memory_mib, facts: m.facts };
    const bytes = o.machine.memory_mib * 1024 * 1024;
    const goldenState = ram && path.resolve(ram.file) !== path.resolve(ownBase) ? path.join(path.dirname(ram.file), 'state') : null;
    const memory =
      (ram ? await savePages(m.qmp, sf, about, { pid: m.pid, path: sf.base, bytes, goldenState, mapIno: ram.mapIno }, { checked: o.hashed }) : null) ??
      (await save(m.qmp, sf, about, 120_000, ram ? { path: sf.base, block: 'mem' } : null));
    phase('memory');
    await m.qmp('cont');
    paused = false;
    pausedMs = Math.round(performance.now() - t0);
    tp = performance.now();
    // The memory's own record goes: a VM made from it gets its own (prepareFromSnapshot).
    await rm(sf.record, { force: true });
    const files: SnapshotRecord['files'] = {};
    let size = 0;
    for (const name of await readdir(work)) {
      const p = path.join(work, name);
      if (name === 'ram.base') continue;
      if (LAYER_FILE.test(name) && isolating()) {
        await chown(p, 0, 0);
        await chmod(p, 0o644);
      }
      // A branch's memory is not flushed (suspend.ts savePages): its VMs read it from the page cache.
      if (o.hashed || p !== sf.state) await syncFile(p);
      const st = await stat(p);
      // The saved memory was hashed as it was written (suspend.ts).
      if (p === sf.state) files[name] = o.hashed ? { bytes: memory.bytes, sha256: memory.sha256 } : { bytes: memory.bytes };
      else files[name] = o.hashed ? await hashFile(p) : { bytes: st.size };
      size += st.blocks * 512;
    }
    const baseBytes = ram ? (await stat(sf.base)).size : null;
    const record: SnapshotRecord = { format: FORMAT, snapshot_id: o.snapshotId, memory, files, base_bytes: baseBytes, runs: o.runs, paused_ms: pausedMs, taken_at: new Date().toISOString() };
    await writeFile(recordPath(work), `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    await syncFile(recordPath(work));
    await rm(o.snapDir, { recursive: true, force: true });
    await rename(work, o.snapDir);
    await syncFile(path.dirname(o.snapDir)).catch(() => undefined);
    phase('kept');
    return { record, size_bytes: size, phases };
  } catch (err) {
    if (paused) await m.qmp('cont').catch(() => undefined);
    await undoFreeze(o.vmDir, o.snapshotId, switched).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
    throw err;
  }
}

/** The snapshot's record, when it is whole (its files not yet checked: checkSnapshot does). */
export async function readSnapshot(snapDir: string): Promise<SnapshotRecord | null> {
  try {
    const r = JSON.parse(await readFile(recordPath(snapDir), 'utf8')) as SnapshotRecord;
    return r.format === FORMAT && r.memory && r.files ? r : null;
  } catch {
    return null;
  }
}

/** Why the snapshot cannot be used (missing, damaged: which file and how), or null when every file matches its record. */
export async function checkSnapshot(snapDir: string): Promise<string | null> {
  const r = await readSnapshot(snapDir);
  if (!r) return 'the snapshot has no complete record on its host';
  if (r.base_bytes !== null) {
    const size = await stat(path.join(snapDir, 'ram.base')).then((s) => s.size, () => -1);
    if (size !== r.base_bytes) return `the memory the snapshot is a difference over is ${size < 0 ? 'missing' : `${size} bytes, expected ${r.base_bytes}`}`;
  }
  for (const [name, want] of Object.entries(r.files)) {
    if (!want.sha256) return `the snapshot's file ${name} has no checksum (a branch's files are not checked)`;
    const got = await hashFile(path.join(snapDir, name)).catch(() => null);
    if (!got) return `the snapshot's file ${name} is missing`;
    if (got.bytes !== want.bytes || got.sha256 !== want.sha256) return `the snapshot's file ${name} is damaged (${got.bytes} bytes, expected ${want.bytes}; its checksum does not match)`;
  }
  return null;
}

/**
 * Makes `vmDir` a suspended VM whose saved memory and disks are the snapshot's (see the top of this
 * file): its first start resumes the snapshot's instant. Its disks' sizes are the frozen layers'.
 */
export async function prepareFromSnapshot(snapDir: string, vmDir: string): Promise<void> {
  const r = await readSnapshot(snapDir);
  if (!r) throw new Error('the snapshot has no complete record on its host');
  await rm(vmDir, { recursive: true, force: true });
  await mkdir(vmDir, { recursive: true, mode: 0o700 });
  try {
    const sf = suspendFiles(vmDir);
    for (const name of await readdir(snapDir)) {
      if (LAYER_FILE.test(name)) await link(path.join(snapDir, name), path.join(vmDir, name));
    }
    for (const disk of DISKS) {
      const tmp = path.join(vmDir, `${disk}.qcow2.tmp`);
      const layer = layerName(r.snapshot_id, disk);
      // The empty top the snapshot keeps; a snapshot taken before it kept one gets it made.
      if (r.files[topName(disk)]) await copyFile(path.join(snapDir, topName(disk)), tmp);
      else await runQemuImg(['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-u', '-b', layer, tmp, String(await qcow2Size(path.join(vmDir, layer)))]);
      await rename(tmp, path.join(vmDir, `${disk}.qcow2`));
    }
    if (r.base_bytes !== null) await link(path.join(snapDir, 'ram.base'), sf.base);
    await link(path.join(snapDir, 'ram.prefix'), sf.prefix).catch(() => undefined);
    await link(path.join(snapDir, 'suspend.state'), sf.state);
    const mark: BranchMark = { snapshot_id: r.snapshot_id, runs: r.runs };
    const record: SuspendRecord & { branch: BranchMark } = { ...r.memory, branch: mark };
    await writeFile(`${sf.record}.tmp`, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    await syncFile(`${sf.record}.tmp`);
    await rename(`${sf.record}.tmp`, sf.record);
  } catch (err) {
    await rm(vmDir, { recursive: true, force: true });
    throw err;
  }
}

/** The branch mark of a VM's saved memory: it was made from a snapshot and has not run yet. */
export function branchMarkOf(record: SuspendRecord | null): BranchMark | null {
  const b = (record as { branch?: BranchMark } | null)?.branch;
  return b && typeof b.snapshot_id === 'string' && Array.isArray(b.runs) ? b : null;
}
