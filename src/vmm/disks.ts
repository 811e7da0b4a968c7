/**
 * A VM's disks on the host: the persist disk and the writable layer of its root, both qcow2. A new
 * disk is a copy-on-write child of an empty ext4 filesystem of its size, made once per size, so
 * nothing is formatted at boot and a new disk costs a few KiB.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, link, mkdir, open, readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { MachineFiles } from './machine.ts';

/**
 * A disk's second name while a snapshot freezes it, and after until the next freeze (branch.ts): the
 * new top QEMU opened by that name, `<disk>.next-<snapshot>.qcow2`.
 */
export const NEXT_TOP = /^(upper|persist)\.next-([A-Za-z0-9_]+)\.qcow2$/;
export const nextTopName = (disk: string, snapshotId: string) => `${disk}.next-${snapshotId}.qcow2`;

/** Removes the disk's next-top names in `dir` but `keep` (the disk they named is replaced or frozen). */
export async function forgetNextTops(dir: string, disk: string, keep?: string): Promise<void> {
  for (const name of await readdir(dir)) {
    if (NEXT_TOP.test(name) && name.startsWith(`${disk}.`) && name !== keep) await rm(path.join(dir, name), { force: true });
  }
}

/** The root layer's size: what a VM can add to its root filesystem. */
export const UPPER_GIB = 8;

function runTool(cmd: string, args: string[], name = cmd): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${name}: ${err.trim()}`))));
  });
}

export function runQemuImg(args: string[]): Promise<void> {
  return runTool('qemu-img', args, `qemu-img ${args[0]}`);
}

/** Empty qcow2 tops by size and backing name length: made by qemu-img once, then given each name. */
const emptyTops = new Map<string, Promise<{ bytes: Buffer; at: number }>>();

/**
 * An empty qcow2 image of `sizeBytes` over the backing file `backing` (a bare name, qcow2), as bytes:
 * qemu-img makes one per size and name length over a stand-in name, and each is that with the name
 * written where its header says the backing name is (a qcow2 header has no checksum). No process per
 * image: a snapshot makes one for each disk while its VM waits.
 */
export async function emptyTopOver(backing: string, sizeBytes: number, scratchDir: string): Promise<Buffer> {
  const key = `${sizeBytes}:${backing.length}`;
  let made = emptyTops.get(key);
  if (!made) {
    made = (async () => {
      const tmp = tmpName(path.join(scratchDir, 'top.qcow2'));
      const standIn = 'x'.repeat(backing.length);
      try {
        await runQemuImg(['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-u', '-b', standIn, tmp, String(sizeBytes)]);
        const bytes = await readFile(tmp);
        const at = Number(bytes.readBigUInt64BE(8));
        if (bytes.readUInt32BE(16) !== backing.length || bytes.toString('latin1', at, at + backing.length) !== standIn) throw new Error('qemu-img wrote the backing name elsewhere');
        return { bytes, at };
      } finally {
        await rm(tmp, { force: true });
      }
    })();
    made.catch(() => emptyTops.delete(key));
    emptyTops.set(key, made);
  }
  const { bytes, at } = await made;
  const out = Buffer.from(bytes);
  out.write(backing, at, 'latin1');
  return out;
}

/**
 * Puts `bytes` (a new top, emptyTopOver) in place as `file`, through a temporary name, owned and
 * moded as `active`: QEMU (of its own user, isolation.ts) writes it as it wrote the disk.
 */
export async function placeTopLike(active: string, file: string, bytes: Buffer): Promise<void> {
  const own = await stat(active);
  await writeFile(`${file}.tmp`, bytes);
  await chown(`${file}.tmp`, own.uid, own.gid);
  await chmod(`${file}.tmp`, own.mode & 0o777);
  await rename(`${file}.tmp`, file);
}

/** A qcow2 file's virtual size, from its header (bytes 24–31): no process, no lock. */
export async function qcow2Size(file: string): Promise<number> {
  const fh = await open(file, 'r');
  try {
    const b = Buffer.alloc(32);
    await fh.read(b, 0, 32, 0);
    if (b.readUInt32BE(0) !== 0x514649fb) throw new Error(`${path.basename(file)} is not a qcow2 file`);
    return Number(b.readBigUInt64BE(24));
  } finally {
    await fh.close();
  }
}

/** How many empty children of backing files (about 200 KiB each) a disk maker keeps. */
const CHILDREN_KEPT = 32;

/** Makes VMs' disks from the blank filesystems kept in `blankDir`. */
export class DiskMaker {
  private readonly blanks = new Map<number, Promise<string>>();
  /** Empty children of backing files, by size and backing (childOf), oldest use first. */
  private readonly children = new Map<string, Promise<Buffer>>();

  constructor(private readonly blankDir: string) {}

  /**
   * Makes the VM's disks: the persist disk once (a template's copy-on-write child, else a blank ext4
   * of the plan's size), the root layer when missing or when a fresh root is asked for (restart,
   * reprovision): a copy-on-write child of the VM's image's layer, else a blank ext4.
   */
  async prepare(f: MachineFiles, spec: { diskGib: number; persistBacking?: string | null; upperBacking?: string | null }, freshRoot: boolean): Promise<void> {
    await mkdir(f.dir, { recursive: true, mode: 0o700 });
    const make = async (file: string, gib: number, backing?: string | null) => {
      if (backing) await writeFile(`${file}.tmp`, await this.childOf(backing, gib, 'qcow2'));
      else await writeFile(`${file}.tmp`, await this.childOf(await this.blank(gib), gib, 'raw'));
      await rename(`${file}.tmp`, file);
      // The disk it replaces goes with its other names (a snapshot's next top, branch.ts).
      await forgetNextTops(f.dir, path.basename(file, '.qcow2'));
    };
    // A whole root of the layout before root layers; its VM starts with a fresh root.
    await rm(path.join(f.dir, 'root.qcow2'), { force: true });
    // Both to their end before a failure is told (the other must not go on making files after it).
    const made = await Promise.allSettled([
      existsSync(f.persist) ? undefined : make(f.persist, spec.diskGib, spec.persistBacking),
      freshRoot || !existsSync(f.upper) ? make(f.upper, UPPER_GIB, spec.upperBacking) : undefined,
    ]);
    for (const m of made) if (m.status === 'rejected') throw m.reason;
  }

  /**
   * An empty qcow2 child of `backing` (a layer, a template's disk, or the blank filesystem, raw) of
   * `gib` GiB, as bytes: made once by qemu-img (about 20 ms, a process), then written for each disk of
   * it (the header names the backing; nothing in it depends on the backing's content or on the file's
   * own name). The newest CHILDREN_KEPT are kept.
   */
  private childOf(backing: string, gib: number, format: 'qcow2' | 'raw'): Promise<Buffer> {
    const key = `${gib}G ${format} ${backing}`;
    let p = this.children.get(key);
    if (p) {
      this.children.delete(key);
      this.children.set(key, p);
      return p;
    }
    p = (async () => {
      await mkdir(this.blankDir, { recursive: true });
      const tmp = tmpName(path.join(this.blankDir, 'child.qcow2'));
      try {
        await runQemuImg(['create', '-q', '-f', 'qcow2', '-F', format, '-b', backing, tmp, `${gib}G`]);
        return await readFile(tmp);
      } finally {
        await rm(tmp, { force: true });
      }
    })();
    p.catch(() => this.children.delete(key));
    this.children.set(key, p);
    if (this.children.size > CHILDREN_KEPT) this.children.delete(this.children.keys().next().value!);
    return p;
  }

  /** The blank ext4 filesystem of `gib` GiB (a sparse raw file, made once, never written again). */
  private blank(gib: number): Promise<string> {
    let p = this.blanks.get(gib);
    if (!p) {
      p = (async () => {
        const file = path.join(this.blankDir, `ext4-${gib}G.raw`);
        if (existsSync(file)) return file;
        await mkdir(this.blankDir, { recursive: true });
        const tmp = tmpName(file);
        await writeFile(tmp, '');
        await truncate(tmp, gib * 1024 ** 3);
        await runTool('mkfs.ext4', ['-q', '-F', '-E', 'lazy_itable_init=1,lazy_journal_init=1,nodiscard', tmp]);
        await placeOnce(tmp, file);
        return file;
      })();
      p.catch(() => this.blanks.delete(gib));
      this.blanks.set(gib, p);
    }
    return p;
  }
}

/**
 * A temporary name beside `file` of its own: several disk makers of one process (the host's, its
 * capturer's, its image builder's) may make the same blank file at once.
 */
function tmpName(file: string): string {
  return `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

/**
 * Puts `tmp` in place as `file` unless another maker got there first (then `tmp` goes): the first one
 * stays, since disks already made are copy-on-write children of it (two mkfs runs differ in their UUIDs).
 */
async function placeOnce(tmp: string, file: string): Promise<void> {
  try {
    await link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await rm(tmp, { force: true });
  }
}
