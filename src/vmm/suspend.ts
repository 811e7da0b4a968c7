/**
 * A suspended VM's saved machine: its memory and device state, in the VM's directory beside its disks,
 * in one of two kinds. A VM whose RAM is mapped copy-on-write from a memory file (it started as a
 * clone or a standby, or resumed over such a file) saves a page file (changedPages.ts): the pages it
 * changed, read from its QEMU's memory, and its devices (`xen-save-devices-state`) after the golden
 * stream's header and RAM section; a resume maps the same file, writes the pages back and loads the
 * devices. Any other VM (booted cold) saves QEMU's migration stream: QEMU writes it to a socket this
 * process listens on; the bytes go to `suspend.state` and through SHA-256 on the way.
 *
 * Only once the file is complete and on disk does `suspend.json` (its size, hash and the machine it
 * fits) appear, by rename: a state without its record is never loaded, so a suspend cut short at any
 * moment leaves nothing a start would trust. A start loads the state into a QEMU waiting paused, and
 * lets the guest run only when its hash matches the record (a damaged file: the VM boots fresh from
 * its disks instead). The record is removed before the guest runs on: the memory is then stale.
 */
import { createHash } from 'node:crypto';
import { closeSync, createReadStream, createWriteStream, fstatSync, fsync, openSync, readSync, writeSync, type BigIntStats } from 'node:fs';
import { chmod, open, readFile, rm, stat } from 'node:fs/promises';
import { discard, hostBootId, linkBase, prefixFor, SUSPEND_FORMAT, uncheckedFault, writeRecord, type SuspendFiles, type SuspendRecord } from './suspendRecord.ts';
import { changedRuns, encodeHead, PAGE, pageCount, PIECE_PAGES, pieces, ramMapping, readHead, readRuns, scratch, writeRuns, type PageFileHead } from './changedPages.ts';
import { filterRamStream, zeroPagesOf } from './ramDiff.ts';
import { isVouched, vouch } from './pageFileVouch.ts';
import net from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';

/** Counts and hashes what passes through. */
class Hasher extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null, data?: Buffer) => void): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    done(null, chunk);
  }
}

type Qmp = <T = unknown>(command: string, args?: object) => Promise<T>;

/** Waits for an outgoing migration to end: completed, or an error naming why not. */
async function migrationDone(qmp: Qmp, deadline: number): Promise<void> {
  for (;;) {
    const st = await qmp<{ status: string; 'error-desc'?: string }>('query-migrate');
    if (st.status === 'completed') return;
    if (st.status === 'failed' || st.status === 'cancelled') throw new Error(`saving the VM's memory failed: ${st['error-desc'] ?? st.status}`);
    if (Date.now() > deadline) throw new Error("saving the VM's memory took too long");
    await sleep(10);
  }
}

/**
 * Saves a running machine: pauses it, streams its migration into `suspend.state` and writes the record.
 * The machine is left paused with its state saved (`postmigrate`); the caller quits it. On failure the
 * machine runs on (when it still can) and nothing is recorded.
 */
export async function save(
  qmp: Qmp,
  f: SuspendFiles,
  machine: Omit<SuspendRecord, 'format' | 'bytes' | 'sha256' | 'saved_at' | 'save_ms' | 'base_bytes' | 'base_pages'>,
  timeoutMs: number,
  /** The file the machine's RAM is mapped from (copy-on-write) and its block's name: save only the difference. */
  ramFrom: { path: string; block: string } | null = null,
): Promise<SuspendRecord> {
  const t0 = Date.now();
  const deadline = t0 + timeoutMs;
  await discard(f, { keepBase: true });
  const baseBytes = ramFrom ? await linkBase(f, ramFrom.path) : null;
  if (baseBytes === null) await rm(f.base, { force: true });
  const baseFh = baseBytes !== null ? await open(f.base, 'r') : null;
  // Known before QEMU sends its first page (read at the first save over this base, then kept).
  const baseZero = baseBytes !== null ? await zeroPagesOf(f.base).catch(() => undefined) : undefined;
  let basePages: SuspendRecord['base_pages'];
  const server = net.createServer();
  let written: Promise<{ bytes: number; sha256: string }> | undefined;
  const connected = new Promise<void>((resolve, reject) => {
    server.once('connection', (sock) => {
      server.close();
      const hasher = new Hasher();
      const out = createWriteStream(f.state, { flags: 'w', mode: 0o600, highWaterMark: 1 << 20 });
      const digest = () => ({ bytes: hasher.bytes, sha256: hasher.hash.digest('hex') });
      if (!baseFh) {
        written = pipeline(sock, hasher, out).then(digest);
      } else {
        const piped = pipeline(hasher, out);
        piped.catch(() => undefined);
        const write = (b: Buffer) => new Promise<void>((res, rej) => hasher.write(b, (err) => (err ? rej(err) : res())));
        written = filterRamStream(sock, write, { fh: baseFh, size: baseBytes!, block: ramFrom!.block, zero: baseZero })
          .then((r) => {
            basePages = { dropped: r.dropped, kept: r.kept, zero: r.zero, zero_dropped: r.zeroDropped };
            hasher.end();
            return piped;
          })
          .then(digest, (err: Error) => {
            sock.destroy();
            hasher.destroy(err);
            throw err;
          });
      }
      // Awaited once QEMU says the migration completed; a QEMU killed in the middle ends it early (the
      // save then fails on QEMU's side), so its failure is never left unhandled.
      written.catch(() => undefined);
      resolve();
    });
    server.once('error', reject);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(f.socket, () => resolve());
  });
  // A QEMU of its own user connects to it (its directory is its own: no one else reaches the socket).
  await chmod(f.socket, 0o666);
  let paused = false;
  try {
    // Stopped first, so the stream is one pass over memory that no longer changes.
    await qmp('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: false }] });
    // QEMU throttles a migration to 128 MiB/s by default: this one goes to a local file, as fast as it can.
    await qmp('migrate-set-parameters', { 'max-bandwidth': 64 * 1024 ** 3, 'downtime-limit': 100_000 });
    await qmp('stop');
    paused = true;
    await qmp('migrate', { uri: `unix:${f.socket}` });
    await Promise.race([connected, sleep(Math.max(0, deadline - Date.now())).then(() => Promise.reject(new Error('QEMU did not connect to save its memory')))]);
    await migrationDone(qmp, deadline);
    const { bytes, sha256 } = await written!;
    const fd = await open(f.state, 'r');
    await fd.sync();
    await fd.close();
    const record: SuspendRecord = {
      format: SUSPEND_FORMAT,
      kind: 'stream',
      bytes,
      sha256,
      ...machine,
      ...(baseBytes !== null ? { base_bytes: baseBytes, base_pages: basePages } : {}),
      saved_at: new Date().toISOString(),
      save_ms: Date.now() - t0,
    };
    await writeRecord(f, record);
    return record;
  } catch (err) {
    server.close();
    await rm(f.record, { force: true });
    await rm(f.state, { force: true });
    // The guest goes on as it was (a failed migration leaves it paused).
    if (paused) await qmp('migrate_cancel').catch(() => undefined);
    if (paused) await qmp('cont').catch(() => undefined);
    throw err;
  } finally {
    await baseFh?.close();
    await rm(f.socket, { force: true });
  }
}

/**
 * Saves a running machine whose RAM is mapped copy-on-write from `ram.path` as a page file (see the top
 * of this file): pauses it, has QEMU write its devices, reads the pages it changed from its memory, and
 * writes the file, then the record. Answers null, with the machine untouched, when its RAM cannot be
 * told apart from the file (a stream is saved instead). The machine is left paused with its state saved;
 * the caller quits it. On failure the machine runs on and nothing is recorded. `checked: false` (a
 * branch's memory, SuspendRecord.boot_id): not hashed nor flushed (80 ms of a starter VM's pause, TCG).
 */
export async function savePages(
  qmp: Qmp,
  f: SuspendFiles,
  machine: Omit<SuspendRecord, 'format' | 'bytes' | 'sha256' | 'saved_at' | 'save_ms' | 'base_bytes' | 'base_pages'>,
  ram: { pid: number; path: string; bytes: number; goldenState: string | null; mapIno?: number },
  { checked = true }: { checked?: boolean } = {},
): Promise<SuspendRecord | null> {
  const t0 = Date.now();
  await discard(f, { keepBase: true });
  const baseBytes = await linkBase(f, ram.path);
  if (baseBytes !== ram.bytes) return null;
  const inode = (await stat(f.base)).ino;
  const addr = await ramMapping(ram.pid, ram.mapIno ?? inode, ram.bytes);
  if (addr === null) return null;
  const prefix = await prefixFor(f, ram.goldenState);
  if (!prefix) return null;
  let paused = false;
  try {
    await qmp('stop');
    paused = true;
    await qmp('xen-save-devices-state', { filename: f.devices, live: false });
    const devices = await readFile(f.devices);
    await rm(f.devices, { force: true });
    // Its own header: the stream's is the prefix's.
    if (devices.length < 9 || devices.readUInt32BE(0) !== 0x5145564d) throw new Error("QEMU wrote no device state");
    const runs = await changedRuns(ram.pid, addr, ram.bytes / PAGE);
    const stream = Buffer.concat([prefix, devices.subarray(8)]);
    const hash = createHash('sha256');
    let bytes = 0;
    const fd = openSync(f.state, 'w', 0o600);
    let written: BigIntStats;
    try {
      // Each piece read, hashed and written before anything else runs (it is in the shared scratch buffer).
      const put = (b: Buffer) => {
        if (checked) hash.update(b);
        bytes += b.length;
        for (let at = 0; at < b.length; ) at += writeSync(fd, b, at, b.length - at);
      };
      put(encodeHead(runs, stream.length));
      let n = 0;
      for (const piece of pieces(runs, PIECE_PAGES)) {
        put(readRuns(ram.pid, addr, piece, scratch()));
        if (++n % 8 === 0) await setImmediate();
      }
      put(stream);
      if (checked) await new Promise<void>((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
      written = fstatSync(fd, { bigint: true });
    } finally {
      closeSync(fd);
    }
    const sha256 = checked ? hash.digest('hex') : '';
    if (checked) vouch(written, sha256);
    const record: SuspendRecord = {
      format: SUSPEND_FORMAT,
      kind: 'pages',
      bytes,
      sha256,
      ...(checked ? {} : { boot_id: hostBootId() }),
      ...machine,
      base_bytes: baseBytes,
      pages: { changed: pageCount(runs), runs: runs.length },
      saved_at: new Date().toISOString(),
      save_ms: Date.now() - t0,
    };
    await writeRecord(f, record);
    return record;
  } catch (err) {
    await rm(f.record, { force: true });
    await rm(f.state, { force: true });
    await rm(f.devices, { force: true });
    if (paused) await qmp('cont').catch(() => undefined);
    throw err;
  }
}

/** Why a saved state could not be loaded (a start then boots the VM fresh from its disks). */
export class DamagedState extends Error {}

/**
 * Loads a saved state into a machine started with `-S -incoming defer` (it stays paused): QEMU reads the
 * file itself while this process hashes it beside, and the load counts only when the bytes match the
 * record. Throws DamagedState when they do not or QEMU refuses them.
 */
export async function load(qmp: Qmp, f: SuspendFiles, record: SuspendRecord, exited: () => boolean, deadline: number): Promise<void> {
  if (!/^[A-Za-z0-9_./-]+$/.test(f.socket)) throw new Error(`the path ${f.socket} holds characters a state cannot be loaded through`);
  // QEMU listens on the socket; the file goes to it through SHA-256, read once.
  const got = await receive(qmp, f, exited, deadline, async (sock) => {
    const hasher = new Hasher();
    await pipeline(createReadStream(f.state, { highWaterMark: 1 << 20 }), hasher, sock);
    return { bytes: hasher.bytes, sha256: hasher.hash.digest('hex') };
  });
  if (got.bytes !== record.bytes || got.sha256 !== record.sha256) {
    throw new DamagedState(`the saved memory is damaged (${got.bytes} bytes, expected ${record.bytes}; its checksum does not match)`);
  }
}

/**
 * Reads the saved page file through SHA-256 and checks it against the record (a start does this
 * before its QEMU starts), but for one this server wrote a moment ago and vouched for (pageFileVouch.ts).
 * Answers its head; throws DamagedState when it does not match or is not one.
 */
export async function checkPageFile(f: SuspendFiles, record: SuspendRecord, ramBytes: number): Promise<PageFileHead> {
  let fd: number;
  try {
    fd = openSync(f.state, 'r');
  } catch (err) {
    throw new DamagedState(`the saved memory could not be read: ${(err as Error).message}`);
  }
  try {
    const st = fstatSync(fd, { bigint: true });
    const unchecked = record.sha256 ? null : uncheckedFault(record, Number(st.size));
    if (unchecked) throw new DamagedState(unchecked);
    // One this server wrote a moment ago, unchanged since, is not read again (pageFileVouch.ts).
    if (record.sha256 && !isVouched(st, record.sha256)) {
      const hash = createHash('sha256');
      const buf = scratch();
      let bytes = 0;
      for (let n = 1; ; n++) {
        const got = readSync(fd, buf, 0, buf.length, bytes);
        if (got === 0) break;
        hash.update(buf.subarray(0, got));
        bytes += got;
        if (n % 8 === 0) await setImmediate();
      }
      if (bytes !== record.bytes || hash.digest('hex') !== record.sha256) {
        throw new DamagedState(`the saved memory is damaged (${bytes} bytes, expected ${record.bytes}; its checksum does not match)`);
      }
    }
    try {
      return readHead(fd, record.bytes, ramBytes / PAGE);
    } catch (err) {
      throw new DamagedState(`the saved memory is not readable: ${(err as Error).message}`);
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Loads a checked page file into a machine started with `-S -incoming defer` over `f.base` (pid `pid`,
 * its RAM `ramBytes` long): its pages are written into the RAM a piece at a time, then its devices
 * loaded from a socket. The machine stays paused. Throws DamagedState when QEMU refuses them.
 */
export async function loadPages(
  qmp: Qmp,
  f: SuspendFiles,
  head: PageFileHead,
  pid: number,
  ramBytes: number,
  exited: () => boolean,
  deadline: number,
  phases: Record<string, number> = {},
  /** The inode the machine's RAM mapping shows, when it maps a sealed copy of the base (isolation.ts), not the base itself. */
  mapIno?: number,
): Promise<void> {
  let t = performance.now();
  const addr = await ramMapping(pid, mapIno ?? (await stat(f.base)).ino, ramBytes);
  if (addr === null) throw new DamagedState('the resumed machine does not map the memory its saved state is a difference over');
  const stream = Buffer.alloc(head.streamBytes);
  const fd = openSync(f.state, 'r');
  try {
    let at = head.dataAt;
    let n = 0;
    for (const piece of pieces(head.runs, PIECE_PAGES)) {
      // Read and written before anything else runs (it is in the shared scratch buffer).
      const data = scratch().subarray(0, pageCount(piece) * PAGE);
      if (readSync(fd, data, 0, data.length, at) !== data.length) throw new DamagedState('the saved memory was cut short');
      writeRuns(pid, addr, piece, data);
      at += data.length;
      if (++n % 8 === 0) await setImmediate();
    }
    if (readSync(fd, stream, 0, stream.length, head.streamAt) !== stream.length) throw new DamagedState('the saved memory was cut short');
  } finally {
    closeSync(fd);
  }
  phases.pages_ms = performance.now() - t;
  t = performance.now();
  // The golden stream was saved with x-ignore-shared: its RAM section says so.
  await qmp('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
  await receive(qmp, f, exited, deadline, (sock) => new Promise<void>((resolve, reject) => sock.end(stream, () => resolve()).once('error', reject)));
  phases.devices_ms = performance.now() - t;
}

/** Waits for an incoming migration to end with the machine paused; DamagedState when QEMU refused it. */
async function loaded(qmp: Qmp, exited: () => boolean, deadline: number): Promise<void> {
  for (;;) {
    if (exited()) throw new DamagedState('QEMU refused the saved memory');
    const st = await qmp<{ status: string }>('query-status').catch(() => ({ status: 'gone' }));
    if (st.status === 'paused' || st.status === 'postmigrate' || st.status === 'prelaunch') return;
    if (st.status !== 'inmigrate') throw new DamagedState(`the saved memory did not load (status ${st.status})`);
    if (Date.now() > deadline) throw new Error('the saved memory did not load in time');
    await sleep(5);
  }
}

/**
 * An incoming migration over `f.socket`: QEMU listens, `send` writes the stream to it, and this answers
 * what `send` did once QEMU has loaded it (paused). DamagedState when QEMU refuses it or it cannot be sent.
 */
async function receive<T>(qmp: Qmp, f: SuspendFiles, exited: () => boolean, deadline: number, send: (sock: net.Socket) => Promise<T>): Promise<T> {
  await rm(f.socket, { force: true });
  await qmp('migrate-incoming', { uri: `unix:${f.socket}` });
  const sent = (async () => {
    const sock = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(f.socket, () => {
        s.off('error', reject);
        s.on('error', () => undefined);
        resolve(s);
      });
      s.once('error', reject);
    });
    try {
      return await send(sock);
    } finally {
      sock.destroy();
    }
  })();
  sent.catch(() => undefined);
  await loaded(qmp, exited, deadline);
  const out = await sent.catch((err: Error) => {
    throw new DamagedState(`the saved memory could not be sent: ${err.message}`);
  });
  await rm(f.socket, { force: true });
  return out;
}
