/**
 * The pages a VM changed in RAM mapped copy-on-write from a file, read and written straight through its
 * QEMU's memory. A VM that started as a clone (or a standby, or a resume over a base) has its RAM mapped
 * `MAP_PRIVATE` from a memory file: a page it never wrote is still the file's page, and a page it wrote
 * is an anonymous copy. The kernel says which is which (/proc/<pid>/pagemap: a page present and not a
 * file page, or swapped out, is a copy), so a suspend reads only those pages (/proc/<pid>/mem) instead
 * of having QEMU walk all of memory, and a resume writes them back into a fresh QEMU mapping the same
 * file before its devices load. Linux's pagemap format: Documentation/admin-guide/mm/pagemap.rst.
 *
 * The saved file (a "page file"): the magic, the number of runs, pages and stream bytes, each run's
 * first page and length, the pages' bytes, then a migration stream of the machine without its RAM (the
 * golden stream's header and RAM section, then the VM's own devices).
 */
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';

export const PAGE = 4096;
const MAGIC = Buffer.from('AGVMPG01', 'latin1');
const HEAD = MAGIC.length + 12;

/** Consecutive changed pages: the first page's number and how many. */
export type Run = [first: number, count: number];

/**
 * The address in QEMU's memory where the memory file (by its inode) is mapped whole as the RAM
 * (`bytes` long, from offset 0), or null when it is not: then the VM's RAM is not the file's (another
 * file took the path since, say) and its changes cannot be told from it.
 */
export async function ramMapping(pid: number, inode: number, bytes: number): Promise<number | null> {
  const maps = await readFile(`/proc/${pid}/maps`, 'utf8');
  for (const line of maps.split('\n')) {
    const [range, , offset, , ino] = line.split(/\s+/);
    if (!range || Number(ino) !== inode || Number.parseInt(offset, 16) !== 0) continue;
    const [from, to] = range.split('-').map((x) => Number.parseInt(x, 16));
    if (to - from === bytes) return from;
  }
  return null;
}

/** The pages of the mapping at `addr` (`pages` long) that are the process's own copies, as runs. */
export async function changedRuns(pid: number, addr: number, pages: number): Promise<Run[]> {
  const entries = Buffer.alloc(pages * 8);
  const fh = await open(`/proc/${pid}/pagemap`, 'r');
  try {
    const { bytesRead } = await fh.read(entries, 0, entries.length, (addr / PAGE) * 8);
    if (bytesRead !== entries.length) throw new Error(`the page map of QEMU ${pid} ended early`);
  } finally {
    await fh.close();
  }
  const runs: Run[] = [];
  for (let i = 0; i < pages; i++) {
    // Bit 63: present; 62: swapped; 61: a file page (or shared anonymous). The high word holds them.
    const hi = entries.readUInt32LE(i * 8 + 4);
    const present = (hi & 0x8000_0000) !== 0;
    const swapped = (hi & 0x4000_0000) !== 0;
    const file = (hi & 0x2000_0000) !== 0;
    if (!swapped && !(present && !file)) continue;
    const last = runs[runs.length - 1];
    if (last && last[0] + last[1] === i) last[1]++;
    else runs.push([i, 1]);
  }
  return runs;
}

export function pageCount(runs: Run[]): number {
  return runs.reduce((n, [, count]) => n + count, 0);
}

// The pages are read and written with one blocking call per run: a starter VM's ~2,500 changed pages
// make ~900 runs, and the thread pool's hop per call made the writes take 62 ms against 22 ms.

/** Pages of a piece: what is read, hashed or written at once (see `pieces`). */
export const PIECE_PAGES = 256;
let scratchBuf: Buffer | null = null;

/**
 * One piece's buffer, allocated once and reused by every save and load. On these hosts (KVM under
 * PVM) each page of fresh memory costs a fault at its first touch: reading and hashing 10 MiB into new
 * buffers took 68 ms, into one reused 1 MiB buffer 10 ms. Used only within one synchronous stretch
 * (filled, then hashed or written, before anything else runs), so that saves and loads can share it.
 */
export function scratch(): Buffer {
  scratchBuf ??= Buffer.allocUnsafe(PIECE_PAGES * PAGE);
  return scratchBuf;
}

/** The pages of `runs` read from the process's mapping at `addr`, one after another (into `into` when given). */
export function readRuns(pid: number, addr: number, runs: Run[], into?: Buffer): Buffer {
  const data = into ? into.subarray(0, pageCount(runs) * PAGE) : Buffer.allocUnsafe(pageCount(runs) * PAGE);
  overRuns(pid, 'r', addr, runs, data, readSync);
  return data;
}

/** Writes the pages of `runs` (`data`, one after another) into the process's mapping at `addr`. */
export function writeRuns(pid: number, addr: number, runs: Run[], data: Buffer): void {
  overRuns(pid, 'r+', addr, runs, data, writeSync);
}

function overRuns(pid: number, flags: 'r' | 'r+', addr: number, runs: Run[], data: Buffer, io: (fd: number, b: Buffer, off: number, len: number, pos: number) => number): void {
  const fd = openSync(`/proc/${pid}/mem`, flags);
  try {
    let at = 0;
    for (const [first, count] of runs) {
      const len = count * PAGE;
      if (io(fd, data, at, len, addr + first * PAGE) !== len) throw new Error(`QEMU ${pid}'s memory could not be ${flags === 'r' ? 'read' : 'written'}`);
      at += len;
    }
  } finally {
    closeSync(fd);
  }
}

/** What a page file's head says: its runs, and where its pages and its stream are. */
export interface PageFileHead {
  runs: Run[];
  /** Where the pages start in the file (right after the head). */
  dataAt: number;
  /** Where the stream starts, and its length: it runs to the end of the file. */
  streamAt: number;
  streamBytes: number;
}

/** A page file's head (see the top of this file): its pages and then `streamBytes` of stream follow it. */
export function encodeHead(runs: Run[], streamBytes: number): Buffer {
  const head = Buffer.alloc(HEAD + runs.length * 8);
  MAGIC.copy(head, 0);
  head.writeUInt32LE(runs.length, MAGIC.length);
  head.writeUInt32LE(pageCount(runs), MAGIC.length + 4);
  head.writeUInt32LE(streamBytes, MAGIC.length + 8);
  runs.forEach(([first, count], k) => {
    head.writeUInt32LE(first, HEAD + k * 8);
    head.writeUInt32LE(count, HEAD + k * 8 + 4);
  });
  return head;
}

/**
 * The head of the page file open as `fd` (`fileBytes` long); throws when it is not one, or its runs do
 * not fit a RAM of `ramPages` pages, or its parts do not add up to the file.
 */
export function readHead(fd: number, fileBytes: number, ramPages: number): PageFileHead {
  const fixed = Buffer.alloc(HEAD);
  if (readSync(fd, fixed, 0, HEAD, 0) < HEAD || !fixed.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error('not a page file');
  const nRuns = fixed.readUInt32LE(MAGIC.length);
  const nPages = fixed.readUInt32LE(MAGIC.length + 4);
  const streamBytes = fixed.readUInt32LE(MAGIC.length + 8);
  const dataAt = HEAD + nRuns * 8;
  if (nRuns > ramPages || fileBytes !== dataAt + nPages * PAGE + streamBytes) throw new Error('a page file of the wrong length');
  const table = Buffer.alloc(nRuns * 8);
  if (readSync(fd, table, 0, table.length, HEAD) !== table.length) throw new Error('a page file cut short');
  const runs: Run[] = [];
  let next = 0;
  for (let k = 0; k < nRuns; k++) {
    const first = table.readUInt32LE(k * 8);
    const count = table.readUInt32LE(k * 8 + 4);
    if (count < 1 || first < next || first + count > ramPages) throw new Error('a page file whose pages do not fit the RAM');
    runs.push([first, count]);
    next = first + count;
  }
  if (pageCount(runs) !== nPages) throw new Error('a page file whose runs do not add up');
  return { runs, dataAt, streamAt: dataAt + nPages * PAGE, streamBytes };
}

/** The runs cut into pieces of at most `maxPages` pages (so that no more than a piece is held at once). */
export function pieces(runs: Run[], maxPages: number): Run[][] {
  const out: Run[][] = [];
  let piece: Run[] = [];
  let n = 0;
  for (let [first, count] of runs) {
    while (count > 0) {
      const take = Math.min(count, maxPages - n);
      piece.push([first, take]);
      n += take;
      first += take;
      count -= take;
      if (n === maxPages) {
        out.push(piece);
        piece = [];
        n = 0;
      }
    }
  }
  if (piece.length) out.push(piece);
  return out;
}

