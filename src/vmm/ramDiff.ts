/**
 * A suspended VM's saved memory, less what it shares with its golden VM. A VM that started as a clone
 * (or a standby) has its RAM mapped copy-on-write from its shape's golden memory file, and most of
 * its pages are still the golden VM's when it is suspended. QEMU's migration stream (format of QEMU
 * 7.2, savevm.c and ram.c) carries every page; this filter drops each page record of the RAM block
 * that equals the same page of a base file (the golden memory, linked into the VM's directory), so
 * the saved state holds only what the VM changed. The start maps the same base file copy-on-write as
 * the RAM (`memory-backend-file,share=off`) and loads the smaller stream over it: a page not in the
 * stream is the base's, which is what it was.
 *
 * Only whole, recognised page records of the named block are ever dropped. Anything the parser does
 * not know (another section interleaved, an unknown flag) ends the filtering: the rest is copied as it
 * came, and a stream copied whole is still right over any base (QEMU's first pass sends every page).
 */
import { open, type FileHandle } from 'node:fs/promises';

const PAGE = 4096;
const FLAG_ZERO = 0x02;
const FLAG_MEM_SIZE = 0x04;
const FLAG_PAGE = 0x08;
const FLAG_EOS = 0x10;
const FLAG_CONTINUE = 0x20;
const FLAG_MASK = 0xfff;
const KNOWN_FLAGS = FLAG_ZERO | FLAG_MEM_SIZE | FLAG_PAGE | FLAG_EOS | FLAG_CONTINUE;
const SECTION_START = 0x01;
const SECTION_PART = 0x02;
const SECTION_END = 0x03;
const SECTION_FOOTER = 0x7e;
const MAGIC = 0x5145564d; // "QEVM"

/** Bytes from an async source, taken in exact amounts. */
class Reader {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;

  constructor(private readonly src: AsyncIterator<Buffer>) {}

  /** At least `n` bytes buffered (fewer only at the end of the source). */
  async fill(n: number): Promise<Buffer> {
    const parts = [this.buf];
    let have = this.buf.length;
    while (have < n && !this.done) {
      const next = await this.src.next();
      if (next.done) this.done = true;
      else {
        parts.push(next.value);
        have += next.value.length;
      }
    }
    if (parts.length > 1) this.buf = Buffer.concat(parts, have);
    return this.buf;
  }

  async take(n: number): Promise<Buffer> {
    const b = await this.fill(n);
    if (b.length < n) throw new Truncated();
    const out = b.subarray(0, n);
    this.buf = b.subarray(n);
    return out;
  }

  /** What is buffered, then the rest of the source as it comes. */
  async *rest(): AsyncGenerator<Buffer> {
    if (this.buf.length) yield this.buf;
    this.buf = Buffer.alloc(0);
    while (!this.done) {
      const next = await this.src.next();
      if (next.done) this.done = true;
      else yield next.value;
    }
  }
}

class Truncated extends Error {
  constructor() {
    super('the migration stream ended in the middle of a record');
  }
}

/** Not a stream this parser knows from here on: the rest is copied. */
class Unknown extends Error {}

/** The base file's pages, read in large pieces (the stream's pages come in address order). */
class Base {
  private at = -1;
  private piece: Buffer = Buffer.alloc(0);
  private static readonly PIECE = 4 << 20;

  constructor(
    private readonly fh: FileHandle,
    readonly size: number,
    /** The base's zero pages, a bit each (see zeroPagesOf), when known: the file is then read only where the stream has a page. */
    private readonly zero?: Uint8Array,
  ) {}

  async equals(addr: number, page: Buffer): Promise<boolean> {
    if (addr + PAGE > this.size) return false;
    const off = await this.load(addr);
    return off + PAGE <= this.piece.length && this.piece.compare(page, 0, PAGE, off, off + PAGE) === 0;
  }

  /** Whether the base's page at `addr` is all zero bytes. */
  async isZero(addr: number): Promise<boolean> {
    if (addr + PAGE > this.size) return false;
    if (this.zero) {
      const i = addr / PAGE;
      return (this.zero[i >> 3] & (1 << (i & 7))) !== 0;
    }
    const off = await this.load(addr);
    return off + PAGE <= this.piece.length && this.piece.compare(ZERO_PAGE, 0, PAGE, off, off + PAGE) === 0;
  }

  /** The piece that holds `addr` read; answers the page's offset in it. */
  private async load(addr: number): Promise<number> {
    const start = addr - (addr % Base.PIECE);
    if (start !== this.at) {
      const len = Math.min(Base.PIECE, this.size - start);
      const piece = Buffer.allocUnsafe(len);
      const { bytesRead } = await this.fh.read(piece, 0, len, start);
      this.piece = piece.subarray(0, bytesRead);
      this.at = start;
    }
    return addr - start;
  }
}

const ZERO_PAGE = Buffer.alloc(PAGE);

/** The zero pages of memory files already read, by the file's identity (a base never changes: a new snapshot is a new file). */
const zeroMaps = new Map<string, Promise<Uint8Array>>();

/**
 * Which pages of the file are all zero, a bit each (bit i of byte i/8: page i), read once per file
 * and kept: most of a golden VM's memory is zero, and a save skips those pages of its stream without
 * reading the base again.
 */
export async function zeroPagesOf(file: string): Promise<Uint8Array> {
  const fh = await open(file, 'r');
  try {
    const st = await fh.stat();
    const key = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
    let map = zeroMaps.get(key);
    if (!map) {
      map = readZeroPages(fh, st.size);
      zeroMaps.set(key, map);
      map.catch(() => zeroMaps.delete(key));
      if (zeroMaps.size > 16) zeroMaps.delete(zeroMaps.keys().next().value!);
    }
    return await map;
  } finally {
    await fh.close();
  }
}

async function readZeroPages(fh: FileHandle, size: number): Promise<Uint8Array> {
  const pages = Math.floor(size / PAGE);
  const map = new Uint8Array(Math.ceil(pages / 8));
  const piece = Buffer.allocUnsafe(4 << 20);
  for (let at = 0; at < pages * PAGE; ) {
    const { bytesRead } = await fh.read(piece, 0, Math.min(piece.length, pages * PAGE - at), at);
    if (bytesRead <= 0) break;
    for (let off = 0; off + PAGE <= bytesRead; off += PAGE) {
      if (piece.compare(ZERO_PAGE, 0, PAGE, off, off + PAGE) === 0) {
        const i = (at + off) / PAGE;
        map[i >> 3] |= 1 << (i & 7);
      }
    }
    at += bytesRead - (bytesRead % PAGE);
  }
  return map;
}

export interface RamDiffResult {
  /** Page records dropped (equal to the base), and kept (they differ from it). */
  dropped: number;
  kept: number;
  /** Zero-page records (a byte each) over a page of the base that is not zero: copied. */
  zero: number;
  /** Zero-page records over a zero page of the base: dropped. */
  zeroDropped: number;
  /** Why filtering stopped before the stream's RAM ended (the rest was copied), if it did. */
  stoppedAt: string | null;
  /** The RAM blocks the stream names. */
  blocks: string[];
  /** Where the RAM section ended in what was written (the bytes before the first device section), when it was parsed whole. */
  ramEnd: number | null;
}

/**
 * Copies a migration stream from `src` to `write`, without the page records of RAM block `block`
 * that equal the base file's page at the same offset.
 */
export async function filterRamStream(
  src: AsyncIterable<Buffer>,
  write: (b: Buffer) => Promise<void>,
  /** Null: nothing is dropped (the stream is only parsed). */
  base: { fh: FileHandle; size: number; block: string; zero?: Uint8Array } | null,
  /** The stream was saved with `x-ignore-shared` (each block in its list carries its guest address too). */
  opts: { ignoreShared?: boolean } = {},
): Promise<RamDiffResult> {
  const r = new Reader(src[Symbol.asyncIterator]());
  const pages = base ? new Base(base.fh, base.size, base.zero) : null;
  const result: RamDiffResult = { dropped: 0, kept: 0, zero: 0, zeroDropped: 0, stoppedAt: null, blocks: [], ramEnd: null };
  let emitted = 0;
  // Output in pieces of about a MiB.
  let out: Buffer[] = [];
  let outBytes = 0;
  const emit = async (...bufs: Buffer[]) => {
    for (const b of bufs) {
      out.push(b);
      outBytes += b.length;
      emitted += b.length;
    }
    if (outBytes >= 1 << 20) await flush();
  };
  const flush = async () => {
    if (!outBytes) return;
    const b = Buffer.concat(out, outBytes);
    out = [];
    outBytes = 0;
    await write(b);
  };

  // The block the last written record named (a record with CONTINUE means "the same block as the last").
  let written: string | null = null;
  let current: string | null = null;
  const blockId = async (): Promise<{ raw: Buffer; id: string }> => {
    const len = await r.take(1);
    const id = await r.take(len[0]);
    return { raw: Buffer.concat([len, id]), id: id.toString('latin1') };
  };
  const idRecord = (id: string) => {
    const b = Buffer.alloc(1 + id.length);
    b[0] = id.length;
    b.write(id, 1, 'latin1');
    return b;
  };

  /** One section's RAM records, up to and with its EOS. */
  const ramRecords = async (setup: boolean) => {
    for (;;) {
      const head = await r.take(8);
      const hi = head.readUInt32BE(0);
      const lo = head.readUInt32BE(4);
      const flags = lo & FLAG_MASK;
      const addr = hi * 2 ** 32 + (lo - flags);
      if (flags & ~KNOWN_FLAGS) {
        await emit(head);
        throw new Unknown(`RAM flags 0x${flags.toString(16)}`);
      }
      if (flags & FLAG_EOS) {
        await emit(head);
        return;
      }
      if (flags & FLAG_MEM_SIZE) {
        if (!setup) {
          await emit(head);
          throw new Unknown('a RAM size record after the setup');
        }
        // The list of blocks: id and length each, until the lengths add up to the total.
        await emit(head);
        let total = 0;
        while (total < addr) {
          const { raw, id } = await blockId();
          result.blocks.push(id);
          const len = await r.take(8);
          await emit(raw, len);
          if (opts.ignoreShared) await emit(await r.take(8));
          total += len.readUInt32BE(0) * 2 ** 32 + len.readUInt32BE(4);
        }
        if (total !== addr) throw new Unknown('RAM block lengths that do not add up');
        continue;
      }
      if (!(flags & (FLAG_ZERO | FLAG_PAGE))) {
        await emit(head);
        throw new Unknown(`a RAM record with flags 0x${flags.toString(16)}`);
      }
      let id = current;
      let raw: Buffer | null = null;
      if (!(flags & FLAG_CONTINUE)) {
        const b = await blockId();
        raw = b.raw;
        id = b.id;
        current = id;
      }
      if (id === null) {
        await emit(head);
        throw new Unknown('a RAM record without a block');
      }
      const body = await r.take(flags & FLAG_PAGE ? PAGE : 1);
      if (pages && id === base!.block && (flags & FLAG_PAGE ? await pages.equals(addr, body) : body[0] === 0 && (await pages.isZero(addr)))) {
        // The page is the base's: a load over the base has it without reading (or, for a zero
        // page, touching) it.
        if (flags & FLAG_PAGE) result.dropped++;
        else result.zeroDropped++;
        continue;
      }
      if (flags & FLAG_PAGE) result.kept++;
      else result.zero++;
      if (raw) await emit(head, raw, body);
      else if (written === id) await emit(head, body);
      else {
        // The block this CONTINUE record meant was named by a record that was dropped: name it.
        const h = Buffer.from(head);
        h.writeUInt32BE(lo & ~FLAG_CONTINUE, 4);
        await emit(h, idRecord(id), body);
      }
      written = id;
    }
  };

  const footer = async (sectionId: number) => {
    const b = await r.fill(1);
    if (b.length && b[0] === SECTION_FOOTER) {
      const f = await r.take(5);
      if (f.readUInt32BE(1) !== sectionId) {
        await emit(f);
        throw new Unknown('a section footer of another section');
      }
      await emit(f);
    }
  };

  try {
    const header = await r.take(8);
    await emit(header);
    if (header.readUInt32BE(0) !== MAGIC) throw new Unknown('no QEMU migration stream header');
    // The configuration section (the machine's name) comes before the RAM section's start: copied to it.
    const prefix = await r.fill(64 * 1024);
    const at = prefix.indexOf(Buffer.from([3, 0x72, 0x61, 0x6d])); // "\x03ram": the RAM section's name
    if (at < 5 || prefix[at - 5] !== SECTION_START) throw new Unknown('no RAM section at the start');
    await emit(await r.take(at - 5));
    const start = await r.take(1 + 4 + 4 + 4 + 4); // type, section id, "\x03ram", instance id, version id
    await emit(start);
    const ramSection = start.readUInt32BE(1);
    await ramRecords(true);
    await footer(ramSection);
    for (;;) {
      const t = await r.fill(5);
      if (t.length < 5 || (t[0] !== SECTION_PART && t[0] !== SECTION_END) || t.readUInt32BE(1) !== ramSection) break;
      const sec = await r.take(5);
      await emit(sec);
      await ramRecords(false);
      await footer(ramSection);
      if (sec[0] === SECTION_END) break;
    }
    result.ramEnd = emitted;
  } catch (err) {
    if (!(err instanceof Unknown)) throw err;
    result.stoppedAt = err.message;
  }
  await flush();
  for await (const b of r.rest()) await write(b);
  return result;
}
