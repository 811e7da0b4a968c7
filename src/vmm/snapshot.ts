/**
 * Golden snapshots: per guest image and VM shape (vCPUs, memory), one VM is booted to a ready agent
 * and saved: its RAM stays in a file it ran on (`memory-backend-file,share=on`), its device state goes
 * through a migration with `x-ignore-shared` (so the RAM is not copied). A VM then starts by mapping
 * that file copy-on-write and loading the state (`-incoming`), which takes a fraction of a cold boot
 * and shares the untouched pages with every other clone.
 *
 * A snapshot is found by a key that hashes everything the saved machine depends on (the image, the
 * shape, the QEMU binary and its command line), so a changed image or machine is never resumed from a
 * stale one: the key is new, and it is built again. Builds run one at a time, in the background; until
 * a shape has its snapshot its VMs boot cold.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import net from 'node:net';
import { pipeline } from 'node:stream/promises';
import { chmod, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { agentRequest } from './channel.ts';
import { machineFiles, spawnMachine, type Machine } from './machine.ts';
import { giveDir, takeDir } from './isolation.ts';
import { machineCommandLine, machineSpawn, stateBesideMem, type MachineOptions, type SnapshotFiles, type SnapshotSource, type VmSpec } from './qemu.ts';
import type { HelloFacts } from '../wire/protocol.ts';

const FORMAT = 1;
/** After a build fails, a shape waits this long before it is tried again. */
const RETRY_AFTER_MS = 10 * 60_000;

interface Meta {
  format: number;
  key: string;
  image_id: string;
  vcpus: number;
  memory_mib: number;
  built_at: string;
  build_ms: number;
}

export interface SnapshotStoreOptions {
  dir: string;
  /** The host's machines: golden VMs are made exactly as its VMs are. */
  machine: MachineOptions;
  log: (msg: string, fields?: object) => void;
}

export class SnapshotStore implements SnapshotSource {
  private readonly ready = new Map<string, SnapshotFiles>();
  private readonly queued = new Map<string, VmSpec>();
  private readonly failedAt = new Map<string, number>();
  private building: string | null = null;
  private qemuVersion = '';
  private idle: Promise<void> = Promise.resolve();

  constructor(private readonly o: SnapshotStoreOptions) {}

  private initialized = false;
  private coldStarts = false;

  /** Every start boots cold while `on` (the VM benchmark times cold boots beside clones this way). */
  coldStartsOnly(on: boolean): void {
    this.coldStarts = on;
  }

  /** Reads the snapshots on disk; removes unfinished builds and those of images other than `keepImage`. */
  async init(keepImage: string | null): Promise<void> {
    this.qemuVersion = (await promisify(execFile)(this.o.machine.qemu, ['--version'])).stdout.split('\n')[0] ?? '';
    await mkdir(this.o.dir, { recursive: true });
    for (const name of await readdir(this.o.dir)) {
      const dir = path.join(this.o.dir, name);
      // A build cut short by a crash may have left its golden QEMU running (it is detached).
      if (name.endsWith('.work')) await killOwnQemu(dir);
      const meta = await readMeta(dir);
      if (!meta || meta.format !== FORMAT || meta.key !== name || (keepImage && meta.image_id !== keepImage)) {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      this.ready.set(name, filesOf(dir, name));
    }
    this.initialized = true;
  }

  private readonly keys = new Map<string, Promise<string>>();

  /** The key of a shape: a hash of the golden machine's command line (paths left out) and QEMU's version. */
  keyOf(spec: VmSpec): Promise<string> {
    const shape = shapeOf(spec);
    let key = this.keys.get(shape);
    if (!key) {
      const placeholder: SnapshotFiles = { key: '', mem: '/snapshot/mem', state: '/snapshot/state' };
      key = machineCommandLine(this.o.machine, goldenSpec(spec), machineFiles('/snapshot'), { mode: 'golden', snap: placeholder })
        .then((args) => createHash('sha256').update(JSON.stringify([FORMAT, this.qemuVersion, args])).digest('hex').slice(0, 24));
      this.keys.set(shape, key);
    }
    return key;
  }

  /** A ready snapshot for the VM's shape; when there is none, one is built for next time. */
  async find(spec: VmSpec): Promise<SnapshotFiles | null> {
    // Before init (the image is not loaded yet) and while cold starts are asked for: a cold boot.
    if (!this.initialized || this.coldStarts) return null;
    const key = await this.keyOf(spec);
    const snap = this.ready.get(key);
    if (snap && existsSync(snap.mem) && existsSync(snap.state)) return snap;
    if (snap) this.ready.delete(key);
    this.want(spec);
    return null;
  }

  /** A snapshot that would not resume is removed; it is built again later. */
  failed(snap: SnapshotFiles, err: Error): void {
    this.o.log('removing a snapshot that did not resume', { snapshot: snap.key, err: err.message });
    this.ready.delete(snap.key);
    this.failedAt.set(snap.key, Date.now());
    void rm(path.dirname(snap.mem), { recursive: true, force: true });
  }

  /** Asks for the snapshot of a shape (in the background; no-op when it exists or is under way). */
  want(spec: VmSpec): void {
    const shape = shapeOf(spec);
    if (this.queued.has(shape)) return;
    this.queued.set(shape, goldenSpec(spec));
    this.idle = this.idle.then(() => this.buildQueued(shape));
  }

  /** Resolves once every build asked for so far has ended. */
  settled(): Promise<void> {
    return this.idle;
  }

  private closed = false;
  private current: Machine | null = null;

  /** The server stops: a build under way is abandoned (its golden VM killed); none starts. */
  async close(): Promise<void> {
    this.closed = true;
    await this.current?.kill();
    await this.idle;
  }

  /** Whether the shape's snapshot is ready now. */
  async has(spec: VmSpec): Promise<boolean> {
    if (!this.initialized || this.coldStarts) return false;
    return this.ready.has(await this.keyOf(spec));
  }

  /** Where builds stand, for /readyz. */
  state(): { ready: number; building: string | null } {
    return { ready: this.ready.size, building: this.building };
  }

  private async buildQueued(shape: string): Promise<void> {
    const spec = this.queued.get(shape)!;
    if (this.closed) {
      this.queued.delete(shape);
      return;
    }
    try {
      const key = await this.keyOf(spec);
      if (this.ready.has(key)) return;
      const failed = this.failedAt.get(key);
      if (failed && Date.now() - failed < RETRY_AFTER_MS) return;
      this.building = shape;
      const t0 = Date.now();
      const snap = await this.build(spec, key);
      this.ready.set(key, snap);
      this.o.log('snapshot ready', { snapshot: key, shape, build_ms: Date.now() - t0 });
    } catch (err) {
      this.failedAt.set(await this.keyOf(spec), Date.now());
      this.o.log('building a snapshot failed; VMs of this shape boot cold', { shape, err });
    } finally {
      this.building = null;
      this.queued.delete(shape);
    }
  }

  /** Boots the golden VM, warms it, saves it, and moves the finished files into place. */
  private async build(spec: VmSpec, key: string): Promise<SnapshotFiles> {
    const final = path.join(this.o.dir, key);
    const work = `${final}.work`;
    await rm(work, { recursive: true, force: true });
    await mkdir(work, { recursive: true, mode: 0o700 });
    const snap = filesOf(work, key);
    const t0 = Date.now();
    const args = await machineCommandLine(this.o.machine, spec, machineFiles(work), { mode: 'golden', snap });
    if (this.closed) throw new Error('the server is stopping');
    // The golden machine runs as a user of its own too; its directory is the host's again once saved.
    const who = await machineSpawn(spec, { mode: 'golden', snap });
    await giveDir(work, who.runAs);
    const m = await spawnMachine(this.o.machine.qemu, machineFiles(work), args, this.o.machine.bootTimeoutMs, { dieWithServer: true, ...who });
    this.current = m;
    try {
      let facts: HelloFacts | null = null;
      while (!facts) {
        if (this.closed) throw new Error('the server is stopping');
        if (m.exited || m.agent.isClosed) throw new Error(`the golden VM stopped during boot (${m.exitText() || 'its agent channel closed'})`);
        if (Date.now() > m.deadline) throw new Error('the golden VM did not answer in time');
        // A request fails at once while nothing listens: wait a little (in timers, so exits are seen).
        facts = await agentRequest<HelloFacts>(m.agent, 'hello', undefined, 500).catch(() => new Promise<null>((r) => setTimeout(() => r(null), 50)));
      }
      await agentRequest(m.agent, 'warm', undefined, 60_000);
      // What a clone's host asks first, once, so the clones resume with it compiled too: the data
      // port's sync and the metrics sampler's figures.
      await agentRequest(m.agent, 'data_sync', { token: m.data.startSync() }, 60_000);
      await agentRequest(m.agent, 'stats', undefined, 60_000).catch(() => undefined);
      await m.qmp('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
      // QEMU may start no process (its sandbox): it writes its state to a socket this process serves.
      const written = receiveFile(path.join(work, 'save.sock'), snap.state);
      await written.listening;
      await m.qmp('migrate', { uri: `unix:${path.join(work, 'save.sock')}` });
      for (;;) {
        const st = await m.qmp<{ status: string; 'error-desc'?: string }>('query-migrate');
        if (st.status === 'completed') break;
        if (st.status === 'failed' || st.status === 'cancelled') throw new Error(`saving the golden VM failed: ${st['error-desc'] ?? st.status}`);
        if (Date.now() > m.deadline) throw new Error('saving the golden VM took too long');
        await new Promise((r) => setTimeout(r, 20));
      }
      await written.done;
    } finally {
      this.current = null;
      await m.kill();
    }
    if (this.closed) throw new Error('the server is stopping');
    const meta: Meta = { format: FORMAT, key, image_id: spec.image.id, vcpus: spec.vcpus, memory_mib: spec.memoryMib, built_at: new Date().toISOString(), build_ms: Date.now() - t0 };
    await writeFile(path.join(work, 'meta.json'), `${JSON.stringify(meta, null, 2)}\n`);
    for (const f of ['qmp.sock', 'agent.sock', 'data.sock', 'assume.sock', 'save.sock', 'qemu.pid']) await rm(path.join(work, f), { force: true });
    await takeDir(work);
    await rm(final, { recursive: true, force: true });
    await rename(work, final);
    return filesOf(final, key);
  }
}

/** Listens on `socket` for one connection and writes what it brings to `file` (mode 0600). */
function receiveFile(socket: string, file: string): { listening: Promise<void>; done: Promise<void> } {
  const server = net.createServer();
  const done = new Promise<void>((resolve, reject) => {
    server.once('connection', (sock) => {
      server.close();
      pipeline(sock, createWriteStream(file, { mode: 0o600 })).then(resolve, reject);
    });
  });
  done.catch(() => undefined);
  const listening = (async () => {
    await rm(socket, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socket, () => resolve());
    });
    await chmod(socket, 0o666);
  })();
  return { listening, done };
}

async function killOwnQemu(dir: string): Promise<void> {
  const pid = Number((await readFile(path.join(dir, 'qemu.pid'), 'utf8').catch(() => '')).trim());
  if (!pid) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.includes(dir + path.sep)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

function filesOf(dir: string, key: string): SnapshotFiles {
  const mem = path.join(dir, 'mem');
  return { key, mem, state: stateBesideMem(mem) };
}

async function readMeta(dir: string): Promise<Meta | null> {
  try {
    return JSON.parse(await readFile(path.join(dir, 'meta.json'), 'utf8')) as Meta;
  } catch {
    return null;
  }
}

function shapeOf(spec: VmSpec): string {
  return `${spec.image.id}/${spec.vcpus}x${spec.memoryMib}`;
}

/** The golden VM of a shape: nothing of any one VM in it. */
function goldenSpec(spec: VmSpec): VmSpec {
  return { vmId: 'golden', vcpus: spec.vcpus, memoryMib: spec.memoryMib, diskGib: 0, image: spec.image, netSlot: 0x7eff, hostname: 'agentvm' };
}
