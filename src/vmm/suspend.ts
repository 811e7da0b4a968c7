/**
 * A suspended VM's saved machine: its memory and device state, as QEMU's migration stream, in the
 * VM's directory beside its disks. QEMU writes the stream to a socket this process listens on; the
 * bytes go to `suspend.state` and through SHA-256 on the way. Only once the file is complete and
 * on disk does `suspend.json` (its size, hash and the machine it fits) appear, by rename: a state
 * without its record is never loaded, so a suspend cut short at any moment leaves nothing a start
 * would trust. A start streams the file back into a QEMU waiting with `-incoming` and paused, hashing
 * it again, and lets the guest run only when the hash matches (a damaged file: the VM boots fresh from
 * its disks instead). The record is removed before the guest runs on: the memory is then stale.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

const FORMAT = 1;

/** What a suspend saved, and what machine it can be loaded into. */
export interface SuspendRecord {
  format: number;
  bytes: number;
  sha256: string;
  /** The suspended machine's RAM was a named backend (it had started as a clone): a resume names it alike. */
  named_ram: boolean;
  image_id: string;
  vcpus: number;
  memory_mib: number;
  saved_at: string;
  save_ms: number;
}

export interface SuspendFiles {
  state: string;
  record: string;
  socket: string;
}

export function suspendFiles(dir: string): SuspendFiles {
  return { state: path.join(dir, 'suspend.state'), record: path.join(dir, 'suspend.json'), socket: path.join(dir, 'suspend.sock') };
}

/** The record of a complete saved state, or null when there is none (or it is not one this code wrote). */
export async function readRecord(f: SuspendFiles): Promise<SuspendRecord | null> {
  try {
    const r = JSON.parse(await readFile(f.record, 'utf8')) as SuspendRecord;
    return r.format === FORMAT && typeof r.sha256 === 'string' && Number.isInteger(r.bytes) ? r : null;
  } catch {
    return null;
  }
}

export function hasRecord(f: SuspendFiles): boolean {
  return existsSync(f.record);
}

/** Forgets the saved state: the record first (then nothing trusts the file), then the file. */
export async function discard(f: SuspendFiles): Promise<void> {
  await rm(f.record, { force: true });
  await syncDir(path.dirname(f.record));
  await rm(f.state, { force: true });
  await rm(f.socket, { force: true });
}

async function syncDir(dir: string): Promise<void> {
  const fd = await open(dir, 'r').catch(() => null);
  if (!fd) return;
  await fd.sync().catch(() => undefined);
  await fd.close();
}

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
export async function save(qmp: Qmp, f: SuspendFiles, machine: Omit<SuspendRecord, 'format' | 'bytes' | 'sha256' | 'saved_at' | 'save_ms'>, timeoutMs: number): Promise<SuspendRecord> {
  const t0 = Date.now();
  const deadline = t0 + timeoutMs;
  await discard(f);
  const server = net.createServer();
  let written: Promise<{ bytes: number; sha256: string }> | undefined;
  const connected = new Promise<void>((resolve, reject) => {
    server.once('connection', (sock) => {
      server.close();
      const hasher = new Hasher();
      const out = createWriteStream(f.state, { flags: 'w', mode: 0o600, highWaterMark: 1 << 20 });
      written = pipeline(sock, hasher, out).then(() => ({ bytes: hasher.bytes, sha256: hasher.hash.digest('hex') }));
      resolve();
    });
    server.once('error', reject);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(f.socket, () => resolve());
  });
  let paused = false;
  try {
    // Stopped first, so the stream is one pass over memory that no longer changes.
    await qmp('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: false }] });
    await qmp('stop');
    paused = true;
    await qmp('migrate', { uri: `unix:${f.socket}` });
    await Promise.race([connected, sleep(Math.max(0, deadline - Date.now())).then(() => Promise.reject(new Error('QEMU did not connect to save its memory')))]);
    await migrationDone(qmp, deadline);
    const { bytes, sha256 } = await written!;
    const fd = await open(f.state, 'r');
    await fd.sync();
    await fd.close();
    const record: SuspendRecord = { format: FORMAT, bytes, sha256, ...machine, saved_at: new Date().toISOString(), save_ms: Date.now() - t0 };
    await writeFile(`${f.record}.tmp`, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    const rfd = await open(`${f.record}.tmp`, 'r');
    await rfd.sync();
    await rfd.close();
    await rename(`${f.record}.tmp`, f.record);
    await syncDir(path.dirname(f.record));
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
    await rm(f.socket, { force: true });
  }
}

/** Why a saved state could not be loaded (a start then boots the VM fresh from its disks). */
export class DamagedState extends Error {}

/**
 * Loads a saved state into a machine started with `-S -incoming defer` (it stays paused), checking the
 * bytes against the record on the way. Throws DamagedState when they do not match or QEMU refuses them.
 */
export async function load(qmp: Qmp, f: SuspendFiles, record: SuspendRecord, exited: () => boolean, deadline: number): Promise<void> {
  await rm(f.socket, { force: true });
  await qmp('migrate-incoming', { uri: `unix:${f.socket}` });
  const sock = await connectWhenListening(f.socket, deadline, exited);
  const hasher = new Hasher();
  try {
    await pipeline(createReadStream(f.state, { highWaterMark: 1 << 20 }), hasher, sock);
  } catch (err) {
    throw new DamagedState(`the saved memory could not be read back: ${(err as Error).message}`);
  } finally {
    void rm(f.socket, { force: true });
  }
  const sha256 = hasher.hash.digest('hex');
  if (hasher.bytes !== record.bytes || sha256 !== record.sha256) {
    throw new DamagedState(`the saved memory is damaged (${hasher.bytes} bytes, expected ${record.bytes}; its checksum does not match)`);
  }
  for (;;) {
    if (exited()) throw new DamagedState('QEMU refused the saved memory');
    const st = await qmp<{ status: string }>('query-status').catch(() => ({ status: 'gone' }));
    if (st.status === 'paused' || st.status === 'postmigrate' || st.status === 'prelaunch') return;
    if (st.status !== 'inmigrate') throw new DamagedState(`the saved memory did not load (status ${st.status})`);
    if (Date.now() > deadline) throw new Error('the saved memory did not load in time');
    await sleep(5);
  }
}

async function connectWhenListening(socket: string, deadline: number, exited: () => boolean): Promise<net.Socket> {
  for (;;) {
    const sock = await new Promise<net.Socket | null>((resolve) => {
      const s = net.connect(socket, () => resolve(s));
      s.once('error', () => resolve(null));
    });
    if (sock) return sock;
    if (exited()) throw new DamagedState('QEMU ended before it took the saved memory');
    if (Date.now() > deadline) throw new Error('QEMU did not listen for the saved memory in time');
    await sleep(5);
  }
}
