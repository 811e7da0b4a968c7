/**
 * The QEMU driver: one `-M microvm` process per VM, supervised. Disks, sockets and the pid file of a
 * VM live in its own directory, so a restarted server finds and re-adopts the VMs that still run.
 * It knows nothing of tenants or money.
 */
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync, openSync, closeSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { agentRequest, connectAgent, connectQmp, qmp, type JsonLineChannel } from './channel.ts';
import type { Accel } from './probe.ts';
import type { ExecArgs, ExecResult, HelloFacts } from '../guest/protocol.ts';
import type { Image } from '../image/build.ts';

export interface VmSpec {
  vmId: string;
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  image: Image;
  /** Picks the VM's private network; distinct per VM on a host. */
  netSlot: number;
  hostname: string;
  /** A template's disk image: the persist disk starts as its copy-on-write child. */
  persistBacking?: string | null;
}

export interface ExitInfo {
  expected: boolean;
  reason: string;
}

export interface DriverOptions {
  vmsDir: string;
  qemu: string;
  accel: Accel;
  /** Let guests reach the outside world through user-mode networking (off: `restrict=on`). */
  egress: boolean;
  bootTimeoutMs: number;
  log?: (msg: string, fields?: object) => void;
}

interface Handle {
  vmId: string;
  pid: number;
  qmp: JsonLineChannel;
  agent: JsonLineChannel;
  facts: HelloFacts;
  stopping: boolean;
  exited: Promise<ExitInfo>;
}

/** The guest network of slot n: 10.(128 + n/256).(n%256).0/24, the guest at .15. */
export function netOfSlot(slot: number): { net: string; guest: string; gateway: string; dns: string } {
  if (!Number.isInteger(slot) || slot < 0 || slot > 0x7fff) throw new Error(`network slot ${slot} is out of range`);
  const prefix = `10.${128 + (slot >> 8)}.${slot & 255}`;
  return { net: `${prefix}.0/24`, guest: `${prefix}.15`, gateway: `${prefix}.2`, dns: `${prefix}.3` };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function runQemuImg(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('qemu-img', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`qemu-img ${args[0]}: ${err.trim()}`))));
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let cachedKhz: number | undefined;
async function hostTscKhz(): Promise<number> {
  if (cachedKhz !== undefined) return cachedKhz;
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const mhz = Number(/^cpu MHz\s*:\s*([\d.]+)/m.exec(cpuinfo)?.[1] ?? 0);
  cachedKhz = Math.round(mhz * 1000);
  return cachedKhz;
}

export class QemuDriver extends EventEmitter {
  private readonly handles = new Map<string, Handle>();

  constructor(readonly opts: DriverOptions) {
    super();
  }

  vmDir(vmId: string): string {
    if (!/^[A-Za-z0-9_]+$/.test(vmId)) throw new Error(`bad VM id ${vmId}`);
    return path.join(this.opts.vmsDir, vmId);
  }

  private files(vmId: string) {
    const dir = this.vmDir(vmId);
    return {
      dir,
      root: path.join(dir, 'root.qcow2'),
      persist: path.join(dir, 'persist.qcow2'),
      qmp: path.join(dir, 'qmp.sock'),
      agent: path.join(dir, 'agent.sock'),
      pid: path.join(dir, 'qemu.pid'),
      console: path.join(dir, 'console.log'),
      log: path.join(dir, 'qemu.log'),
    };
  }

  isRunning(vmId: string): boolean {
    return this.handles.has(vmId);
  }

  facts(vmId: string): HelloFacts | undefined {
    return this.handles.get(vmId)?.facts;
  }

  pidOf(vmId: string): number | undefined {
    return this.handles.get(vmId)?.pid;
  }

  /** VM directories on disk (running or not). */
  async listVmDirs(): Promise<string[]> {
    return (await readdir(this.opts.vmsDir).catch(() => [] as string[])).filter((n) => /^vm_[A-Za-z0-9]+$/.test(n));
  }

  /**
   * Makes the VM's disks: the persist disk once (sparse qcow2 of the plan's size), the root overlay on
   * the image's base when missing or when a fresh root is asked for (restart, reprovision).
   */
  async prepareDisks(spec: VmSpec, freshRoot: boolean): Promise<void> {
    const f = this.files(spec.vmId);
    await mkdir(f.dir, { recursive: true, mode: 0o700 });
    if (!existsSync(f.persist)) {
      const backing = spec.persistBacking ? ['-F', 'qcow2', '-b', spec.persistBacking] : [];
      await runQemuImg(['create', '-q', '-f', 'qcow2', ...backing, `${f.persist}.tmp`, `${spec.diskGib}G`]);
      await rm(f.persist, { force: true });
      await rename(`${f.persist}.tmp`, f.persist);
    }
    if (freshRoot || !existsSync(f.root)) {
      await rm(f.root, { force: true });
      await runQemuImg(['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', spec.image.rootfs, f.root]);
    }
  }

  /** The QEMU command line of a VM (its disks must exist). */
  async commandLine(spec: VmSpec): Promise<string[]> {
    const f = this.files(spec.vmId);
    const net = netOfSlot(spec.netSlot);
    const cmdline = [
      'console=ttyS0',
      'quiet',
      'panic=-1',
      'pci=off',
      'reboot=t',
      ...(this.opts.accel === 'tcg' ? [`tsc_early_khz=${await hostTscKhz()}`] : []),
      `agentvm.ip=${net.guest}/24`,
      `agentvm.gw=${net.gateway}`,
      `agentvm.hostname=${spec.hostname}`,
    ].join(' ');
    const accel = this.opts.accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host,-arch-capabilities'] : ['-accel', 'tcg,tb-size=128', '-cpu', 'max'];
    return [
      '-name', spec.vmId,
      '-M', 'microvm,isa-serial=on,rtc=on',
      ...accel,
      '-m', String(spec.memoryMib),
      '-smp', String(spec.vcpus),
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
      '-kernel', spec.image.kernel,
      '-initrd', spec.image.initramfs,
      '-append', cmdline,
      '-serial', `file:${f.console}`,
      '-drive', `id=root,file=${f.root},format=qcow2,if=none,cache=unsafe,discard=unmap`,
      '-device', 'virtio-blk-device,drive=root,serial=root',
      '-drive', `id=persist,file=${f.persist},format=qcow2,if=none,cache=writeback,discard=unmap`,
      '-device', 'virtio-blk-device,drive=persist,serial=persist',
      '-netdev', `user,id=net0,net=${net.net},host=${net.gateway},dns=${net.dns},restrict=${this.opts.egress ? 'off' : 'on'}`,
      '-device', 'virtio-net-device,netdev=net0',
      '-device', 'virtio-rng-device',
      '-device', 'virtio-serial-device',
      '-chardev', `socket,id=agent,path=${f.agent},server=on,wait=off`,
      '-device', 'virtserialport,chardev=agent,name=agentvm.0',
      '-qmp', `unix:${f.qmp},server=on,wait=off`,
      '-pidfile', f.pid,
    ];
  }

  /** The last lines the guest printed on its console: what a failed boot reports. */
  async consoleTail(vmId: string, lines = 5): Promise<string> {
    const f = this.files(vmId);
    const text = await readFile(f.console, 'utf8').catch(() => '');
    const log = await readFile(f.log, 'utf8').catch(() => '');
    return `${text}\n${log}`.split('\n').map((l) => l.trim()).filter(Boolean).slice(-lines).join(' | ');
  }

  /** Boots the VM and answers once its guest agent has said hello. */
  async start(spec: VmSpec): Promise<HelloFacts> {
    if (this.handles.has(spec.vmId)) throw new Error(`${spec.vmId} is already running`);
    const f = this.files(spec.vmId);
    for (const p of [f.qmp, f.agent, f.pid, f.console]) await rm(p, { force: true });
    const logFd = openSync(f.log, 'a');
    const child = spawn(this.opts.qemu, await this.commandLine(spec), { detached: true, stdio: ['ignore', logFd, logFd] });
    closeSync(logFd);
    let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    const childExit = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        exitInfo = { code, signal };
        resolve();
      });
      child.once('error', (err) => {
        exitInfo = { code: null, signal: null };
        this.opts.log?.('qemu failed to start', { vm_id: spec.vmId, err: err.message });
        resolve();
      });
    });
    const deadline = Date.now() + this.opts.bootTimeoutMs;
    const failBoot = async (why: string): Promise<never> => {
      if (!exitInfo && child.pid) {
        try {
          process.kill(child.pid, 'SIGKILL');
        } catch {
          // gone already
        }
        await childExit;
      }
      const tail = await this.consoleTail(spec.vmId);
      throw new Error(`${why}${tail ? `; console: ${tail}` : ''}`);
    };
    try {
      let qmpCh: JsonLineChannel | undefined;
      while (!qmpCh) {
        if (exitInfo) return await failBoot(`qemu exited during start (${describeExit(exitInfo)})`);
        if (Date.now() > deadline) return await failBoot('qemu did not open its control socket in time');
        if (existsSync(f.qmp)) qmpCh = await connectQmp(f.qmp).catch(() => undefined);
        if (!qmpCh) await sleep(20);
      }
      const agent = await connectAgent(f.agent);
      const facts = await this.awaitHello(agent, deadline, () => exitInfo !== undefined);
      if (!facts) {
        qmpCh.close();
        agent.close();
        return await failBoot(exitInfo ? `the guest stopped during boot (${describeExit(exitInfo)})` : `the guest agent did not answer within ${this.opts.bootTimeoutMs / 1000} s`);
      }
      this.track(spec.vmId, child.pid!, qmpCh, agent, facts, childExit.then(() => describeExit(exitInfo!)));
      return facts;
    } catch (err) {
      if (!exitInfo) await failBoot((err as Error).message).catch(() => undefined);
      throw err;
    }
  }

  private async awaitHello(agent: JsonLineChannel, deadline: number, gone: () => boolean): Promise<HelloFacts | null> {
    // Until the guest opens its port nothing answers; ask again every so often.
    while (Date.now() < deadline && !gone() && !agent.isClosed) {
      try {
        return await agentRequest<HelloFacts>(agent, 'hello', undefined, 500);
      } catch {
        // not up yet
      }
    }
    return null;
  }

  private track(vmId: string, pid: number, qmpCh: JsonLineChannel, agent: JsonLineChannel, facts: HelloFacts, exitReason: Promise<string>): void {
    const handle: Handle = {
      vmId,
      pid,
      qmp: qmpCh,
      agent,
      facts,
      stopping: false,
      exited: Promise.race([
        exitReason,
        // An adopted QEMU is not our child: its control socket closing is how its end shows. For our
        // own child, the exit status (a signal, a code) follows a moment later and says more.
        new Promise<void>((resolve) => qmpCh.once('close', resolve)).then(() =>
          Promise.race([exitReason, sleep(1000).then(() => 'exited (its control socket closed)')]),
        ),
      ]).then(async (reason) => {
        // The socket closes a moment before the process is gone; wait for that, briefly.
        for (let i = 0; i < 100 && pidAlive(pid); i++) await sleep(20);
        return { expected: handle.stopping, reason };
      }),
    };
    this.handles.set(vmId, handle);
    void handle.exited.then((info) => {
      qmpCh.close();
      agent.close();
      if (this.handles.get(vmId) === handle) this.handles.delete(vmId);
      this.emit('exit', vmId, info);
    });
  }

  /**
   * Finds a QEMU left running by an earlier server process and takes it over: the pid file names it,
   * and its command line must name this VM's directory (a recycled pid is never touched).
   */
  async adopt(vmId: string): Promise<HelloFacts | null> {
    if (this.handles.has(vmId)) return this.handles.get(vmId)!.facts;
    const f = this.files(vmId);
    const pid = await this.ownPid(vmId);
    if (!pid) return null;
    try {
      const qmpCh = await connectQmp(f.qmp);
      const agent = await connectAgent(f.agent);
      const facts = await agentRequest<HelloFacts>(agent, 'hello', undefined, 5000);
      this.track(vmId, pid, qmpCh, agent, facts, new Promise<string>(() => undefined));
      return facts;
    } catch (err) {
      this.opts.log?.('could not adopt a running VM; stopping it', { vm_id: vmId, err: (err as Error).message });
      await this.killPid(vmId, pid);
      return null;
    }
  }

  /** The pid in the VM's pid file, if that process is alive and is this VM's QEMU. */
  async ownPid(vmId: string): Promise<number | null> {
    const f = this.files(vmId);
    const pid = Number((await readFile(f.pid, 'utf8').catch(() => '')).trim());
    if (!pid || !pidAlive(pid)) return null;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    return cmdline.includes(f.dir + path.sep) ? pid : null;
  }

  private async killPid(vmId: string, pid: number): Promise<void> {
    if ((await this.ownPid(vmId)) !== pid) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    for (let i = 0; i < 250 && pidAlive(pid); i++) await sleep(20);
  }

  /** One request to the VM's guest agent. */
  async request<T>(vmId: string, op: string, args: unknown, timeoutMs: number): Promise<T> {
    const h = this.handles.get(vmId);
    if (!h) throw new Error(`${vmId} is not running`);
    return agentRequest<T>(h.agent, op, args, timeoutMs);
  }

  exec(vmId: string, args: ExecArgs, timeoutMs: number): Promise<ExecResult> {
    return this.request<ExecResult>(vmId, 'exec', args, timeoutMs);
  }

  async ping(vmId: string): Promise<number> {
    const t = process.hrtime.bigint();
    await this.request(vmId, 'ping', undefined, 5000);
    return Number(process.hrtime.bigint() - t) / 1e6;
  }

  /** Stops the VM: flush the guest's disks through its agent, then quit QEMU; kill it if that hangs. */
  async stop(vmId: string, opts: { graceful: boolean } = { graceful: true }): Promise<void> {
    const h = this.handles.get(vmId);
    if (!h) {
      const pid = await this.ownPid(vmId);
      if (pid) await this.killPid(vmId, pid);
      return;
    }
    h.stopping = true;
    if (opts.graceful) {
      await agentRequest(h.agent, 'sync', undefined, 10_000).catch(() => undefined);
      await qmp(h.qmp, 'quit', undefined, 2000).catch(() => undefined);
      const quit = await Promise.race([h.exited.then(() => true), sleep(5000).then(() => false)]);
      if (quit) return;
    }
    await this.killPid(vmId, h.pid);
    await h.exited;
  }

  /** Stops the VM and removes its directory with every disk. */
  async destroy(vmId: string): Promise<void> {
    await this.stop(vmId, { graceful: false });
    await rm(this.vmDir(vmId), { recursive: true, force: true });
  }

  /** Where the VM's persist disk is (a capture copies it). */
  persistPath(vmId: string): string {
    return this.files(vmId).persist;
  }

  /** Bytes the VM's disks take on the host. */
  async diskUsage(vmId: string): Promise<number> {
    const f = this.files(vmId);
    let total = 0;
    for (const p of [f.root, f.persist]) total += await stat(p).then((s) => s.blocks * 512).catch(() => 0);
    return total;
  }

  /** Stops every VM this driver tracks (tests and benchmarks; a normal shutdown leaves VMs running). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.handles.keys()].map((id) => this.stop(id, { graceful: false })));
  }

  /** Lets go of every VM without stopping it (server shutdown: the next server re-adopts them). */
  release(): void {
    for (const h of this.handles.values()) {
      h.stopping = true;
      h.qmp.removeAllListeners('close');
      h.qmp.close();
      h.agent.close();
    }
    this.handles.clear();
  }
}

function describeExit(e: { code: number | null; signal: NodeJS.Signals | null }): string {
  if (e.signal) return `killed by ${e.signal}`;
  return e.code === null ? 'exited' : `exit code ${e.code}`;
}
