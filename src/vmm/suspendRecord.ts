/**
 * A suspended VM's saved state on disk, beside its disks: the files it is made of and `suspend.json`,
 * the record that alone makes a start trust the state (written last, by rename, after everything it
 * names is on disk; removed first when the state is forgotten). suspend.ts saves and loads the state.
 */
import { existsSync, readFileSync } from 'node:fs';
import { link, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { filterRamStream } from './ramDiff.ts';

/** The record's format: a record of another is not loaded. */
export const SUSPEND_FORMAT = 1;

/** What a suspend saved, and what machine it can be loaded into. */
export interface SuspendRecord {
  format: number;
  /** A page file (the pages the VM changed over `ram.base`, and its devices) or QEMU's whole migration stream (missing: a stream). */
  kind?: 'pages' | 'stream';
  bytes: number;
  /** The state's SHA-256; '' for a branch's memory, which is not hashed (see `boot_id`). */
  sha256: string;
  /**
   * A branch's memory (branch.ts) is neither hashed nor flushed to the disk: its VMs start from it
   * within a second, read from the page cache, which holds exactly what was written (a kill of the
   * server loses none of it). It is trusted, by its size, only within the host's boot it was written
   * in (`/proc/sys/kernel/random/boot_id`): after the host restarted it may be torn, and is not loaded.
   */
  boot_id?: string;
  /** The suspended machine's RAM was a named backend (it had started as a clone): a resume names it alike. */
  named_ram: boolean;
  image_id: string;
  vcpus: number;
  memory_mib: number;
  /** What the guest said of itself when it was last started (a resume answers them without asking). */
  facts: unknown;
  /**
   * The saved memory is a difference over `ram.base` (its size in bytes): the golden memory the VM's
   * RAM was mapped from, linked beside it. A resume maps it as the RAM and loads the state over it.
   */
  base_bytes?: number;
  /** Page records the difference left out (equal to the base), kept (they differ), and zero pages kept and left out. */
  base_pages?: { dropped: number; kept: number; zero: number; zero_dropped: number };
  /** A page file's changed pages and the runs they make. */
  pages?: { changed: number; runs: number };
  saved_at: string;
  save_ms: number;
}

let bootId: string | undefined;
/** The host's boot, as the kernel names it (a new one at each boot). */
export function hostBootId(): string {
  return (bootId ??= readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
}

/** Why a branch's memory (not hashed: see SuspendRecord.boot_id) of `size` bytes may not be loaded, or null. */
export function uncheckedFault(record: SuspendRecord, size: number): string | null {
  if (record.boot_id !== hostBootId()) return "the branch's memory was written before the host restarted and was never checked: it is not loaded";
  return size === record.bytes ? null : `the saved memory is damaged (${size} bytes, expected ${record.bytes})`;
}

export interface SuspendFiles {
  state: string;
  record: string;
  socket: string;
  /** The memory a saved difference is over (see SuspendRecord.base_bytes); also what a VM resumed over it maps. */
  base: string;
  /** The header and RAM section of the golden stream `base` came with (a page file's stream starts with them). */
  prefix: string;
  /** Where QEMU writes its devices' state during a save. */
  devices: string;
}

export function suspendFiles(dir: string): SuspendFiles {
  return {
    state: path.join(dir, 'suspend.state'),
    record: path.join(dir, 'suspend.json'),
    socket: path.join(dir, 'suspend.sock'),
    base: path.join(dir, 'ram.base'),
    prefix: path.join(dir, 'ram.prefix'),
    devices: path.join(dir, 'suspend.devices'),
  };
}

/** The record of a complete saved state, or null when there is none (or it is not one this code wrote). */
export async function readRecord(f: SuspendFiles): Promise<SuspendRecord | null> {
  try {
    const r = JSON.parse(await readFile(f.record, 'utf8')) as SuspendRecord;
    return r.format === SUSPEND_FORMAT && typeof r.sha256 === 'string' && Number.isInteger(r.bytes) ? r : null;
  } catch {
    return null;
  }
}

export function hasRecord(f: SuspendFiles): boolean {
  return existsSync(f.record);
}

/**
 * Forgets the saved state: the record first (then nothing trusts the file), then the file; and the
 * base memory unless `keepBase` (a resumed VM's RAM is mapped from it, and its next suspend reuses it).
 */
export async function discard(f: SuspendFiles, opts: { keepBase?: boolean } = {}): Promise<void> {
  await rm(f.record, { force: true });
  await syncDir(path.dirname(f.record));
  await rm(f.state, { force: true });
  await rm(f.socket, { force: true });
  await rm(f.devices, { force: true });
  if (!opts.keepBase) {
    await rm(f.base, { force: true });
    await rm(f.prefix, { force: true });
  }
}

/**
 * Makes `f.base` the memory file `from` (a hard link: the golden memory stays as it was however its
 * snapshot changes later). Answers its size, or null when it cannot be linked (then no difference is saved).
 */
export async function linkBase(f: SuspendFiles, from: string): Promise<number | null> {
  try {
    if (path.resolve(from) !== path.resolve(f.base)) {
      // Whatever came with the base it replaces goes too.
      await rm(f.prefix, { force: true });
      await rm(`${f.base}.tmp`, { force: true });
      await link(from, `${f.base}.tmp`);
      await rename(`${f.base}.tmp`, f.base);
    }
    return (await stat(f.base)).size;
  } catch {
    await rm(`${f.base}.tmp`, { force: true });
    return null;
  }
}

async function syncDir(dir: string): Promise<void> {
  const fd = await open(dir, 'r').catch(() => null);
  if (!fd) return;
  await fd.sync().catch(() => undefined);
  await fd.close();
}

/** Writes the record (the saved state is complete and on disk before): from here a start trusts the state. */
export async function writeRecord(f: SuspendFiles, record: SuspendRecord): Promise<void> {
  await writeFile(`${f.record}.tmp`, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  const rfd = await open(`${f.record}.tmp`, 'r');
  await rfd.sync();
  await rfd.close();
  await rename(`${f.record}.tmp`, f.record);
  await syncDir(path.dirname(f.record));
}

/**
 * The golden stream's header and RAM section (its ROMs and tables; the RAM itself is the memory file),
 * for the base `f.base` now is: kept in `f.prefix`, taken from `goldenState` when the base was just
 * linked from that snapshot. Null when there is none to take (the VM is then saved as a stream).
 */
export async function prefixFor(f: SuspendFiles, goldenState: string | null): Promise<Buffer | null> {
  const kept = await readFile(f.prefix).catch(() => null);
  if (kept || !goldenState) return kept;
  const golden = await readFile(goldenState).catch(() => null);
  if (!golden) return null;
  const parsed = await filterRamStream((async function* () { yield golden; })(), async () => undefined, null, { ignoreShared: true });
  if (parsed.ramEnd === null) return null;
  const prefix = golden.subarray(0, parsed.ramEnd);
  await writeFile(`${f.prefix}.tmp`, prefix, { mode: 0o600 });
  await rename(`${f.prefix}.tmp`, f.prefix);
  return prefix;
}
