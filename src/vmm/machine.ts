/**
 * One machine: a QEMU process and the files it lives by (disks, sockets, pid file, logs, all in one
 * directory). Spawning it and connecting to its control (QMP), agent and assume sockets; finding it
 * again by its pid file after a server restart; seeing it end; killing it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, createReadStream, existsSync, openSync } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { readFile, realpath, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectAgent, connectQmp, qmp, type JsonLineChannel } from './channel.ts';
import { parseKeyValues } from '../wire/protocol.ts';
import { DataChannel } from './dataChannel.ts';
import type { RunAs } from './isolation.ts';

export interface MachineFiles {
  dir: string;
  upper: string;
  persist: string;
  qmp: string;
  agent: string;
  assume: string;
  /** The data port: byte streams (shells, files) beside the agent's JSON lines. */
  data: string;
  /** The VM's egress gateway socket (the host's gateway listens, QEMU's forward connects). */
  egress: string;
  pid: string;
  console: string;
  log: string;
}

export function machineFiles(dir: string): MachineFiles {
  return {
    dir,
    upper: path.join(dir, 'upper.qcow2'),
    persist: path.join(dir, 'persist.qcow2'),
    qmp: path.join(dir, 'qmp.sock'),
    agent: path.join(dir, 'agent.sock'),
    assume: path.join(dir, 'assume.sock'),
    data: path.join(dir, 'data.sock'),
    egress: path.join(dir, 'egress.sock'),
    pid: path.join(dir, 'qemu.pid'),
    console: path.join(dir, 'console.log'),
    log: path.join(dir, 'qemu.log'),
  };
}

/** A QEMU process being brought up: its control and agent channels, its end, and a way to end it. */
export interface Machine {
  pid: number;
  qmpCh: JsonLineChannel;
  agent: JsonLineChannel;
  data: DataChannel;
  deadline: number;
  readonly exited: boolean;
  exit: Promise<string>;
  exitText(): string;
  qmp<T = unknown>(command: string, args?: object): Promise<T>;
  /**
   * Writes a line to the assume program's port and answers its key=value lines: the identity (a
   * standby's second line, the VM it becomes, later), then a resumed VM's clock (assume.pl).
   */
  assume(line: string, opts?: { timeoutMs?: number }): Promise<Record<string, string>>;
  /**
   * The assume port's connection, kept for the machine's life: while a host is connected the assume
   * program waits for its clock in a blocking read; with none it would look every second.
   */
  assumePort: net.Socket;
  kill(): Promise<void>;
}

function describeExit(e: { code: number | null; signal: NodeJS.Signals | null }): string {
  if (e.signal) return `killed by ${e.signal}`;
  return e.code === null ? 'exited' : `exit code ${e.code}`;
}

/** The most of an assume program's answer kept (its identity's facts are about 1 KB). */
const ASSUME_ANSWER_MAX_CHARS = 64 * 1024;

const SETPRIV = '/usr/bin/setpriv';
const NICE = '/usr/bin/nice';
/**
 * Guests run below the control plane: a host whose VMs are busy (boots under TCG take a whole core
 * each) still answers its API, restarts in seconds and meters on time. `nice` execs QEMU, so every
 * thread QEMU makes later (its vCPUs) inherits the priority. With the kernel's autogroup scheduling,
 * a detached QEMU (a session of its own) is a group of its own that competes as an equal whatever
 * its threads' niceness: the group is niced too.
 */
const VM_NICENESS = '19';

async function niceAutogroup(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/autogroup`, VM_NICENESS).catch(() => undefined); // no autogroup here: nothing to do
}

/**
 * Spawns QEMU detached and connects to its QMP, agent and assume sockets. A VM's QEMU outlives this
 * process (the next server re-adopts it); with `dieWithServer` (a golden VM being saved) it is killed
 * when this process ends, however it ends (util-linux's setpriv --pdeathsig).
 */
export async function spawnMachine(
  qemu: string,
  f: MachineFiles,
  args: string[],
  timeoutMs: number,
  opts: { dieWithServer?: boolean; runAs?: RunAs | null; fds?: number[] } = {},
): Promise<Machine> {
  for (const p of [f.qmp, f.agent, f.assume, f.data, f.pid, f.console]) await rm(p, { force: true });
  const logFd = openSync(f.log, 'a');
  const niced = existsSync(NICE) ? [NICE, '-n', VM_NICENESS, qemu, ...args] : [qemu, ...args];
  const [cmd, ...argv] = opts.dieWithServer && existsSync(SETPRIV) ? [SETPRIV, '--pdeathsig', 'KILL', '--', ...niced] : niced;
  // As the machine's own user (isolation.ts): set before anything is run, with no group but its own.
  const child: ChildProcess = spawn(cmd, argv, {
    detached: true,
    stdio: ['ignore', logFd, logFd, ...(opts.fds ?? [])],
    ...(opts.runAs ? { uid: opts.runAs.uid, gid: opts.runAs.gid } : {}),
  });
  closeSync(logFd);
  if (child.pid) await niceAutogroup(child.pid);
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const childExit = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => ((exitInfo = { code, signal }), resolve()));
    child.once('error', () => ((exitInfo = { code: null, signal: null }), resolve()));
  });
  const deadline = Date.now() + timeoutMs;
  const kill = async () => {
    if (!exitInfo && child.pid) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // gone already
      }
      await childExit;
    }
  };
  let qmpCh: JsonLineChannel | undefined;
  let agent: JsonLineChannel | undefined;
  let data: DataChannel | undefined;
  let assumeSock: net.Socket | undefined;
  let assumeOut = '';
  let asking = false;
  try {
    while (!qmpCh) {
      if (exitInfo) throw new Error(`qemu exited during start (${describeExit(exitInfo)}): ${(await readFile(f.log, 'utf8').catch(() => '')).trim().split('\n').slice(-2).join(' ')}`);
      if (Date.now() > deadline) throw new Error('qemu did not open its control socket in time');
      // QEMU answers once its main loop runs; on a busy host that can take long, so one try waits
      // as long as the start may.
      if (existsSync(f.qmp)) qmpCh = await connectQmp(f.qmp, Math.max(5000, deadline - Date.now())).catch(() => undefined);
      if (!qmpCh) await sleep(5);
    }
    agent = await connectAgent(f.agent);
    data = await DataChannel.connect(f.data);
    assumeSock = await new Promise<net.Socket>((resolve, reject) => {
      const sock = net.connect(f.assume, () => resolve(sock));
      sock.once('error', reject);
    });
    // Only an answer asked for is kept, and only so much of it: the port stays connected for the
    // machine's life, and what a guest writes there on its own is not the server's memory to fill.
    assumeSock.on('data', (c: Buffer) => {
      if (asking && assumeOut.length < ASSUME_ANSWER_MAX_CHARS) assumeOut += c.toString();
    });
    assumeSock.on('error', () => undefined);
  } catch (err) {
    qmpCh?.close();
    agent?.close();
    data?.close();
    await kill();
    throw err;
  }
  const q = qmpCh;
  const a = agent;
  const d = data;
  const as = assumeSock;
  return {
    pid: child.pid!,
    qmpCh: q,
    agent: a,
    data: d,
    deadline,
    get exited() {
      return exitInfo !== undefined;
    },
    exit: childExit.then(() => describeExit(exitInfo!)),
    exitText: () => (exitInfo ? describeExit(exitInfo) : ''),
    qmp: <T,>(command: string, args?: object) => qmp<T>(q, command, args, Math.max(1000, deadline - Date.now())),
    assumePort: as,
    assume: (line: string, opts?: { timeoutMs?: number }) =>
      new Promise<Record<string, string>>((resolve, reject) => {
        const check = () => {
          if (!/(^|\n)end\n/.test(assumeOut)) return false;
          as.off('data', check);
          clearTimeout(timer);
          const answer = parseKeyValues(assumeOut);
          asking = false;
          assumeOut = '';
          resolve(answer);
          return true;
        };
        const timer = setTimeout(() => {
          as.off('data', check);
          asking = false;
          assumeOut = '';
          reject(new Error(exitInfo ? `qemu ${describeExit(exitInfo)}` : 'the assume program did not answer in time'));
        }, opts?.timeoutMs ?? Math.max(1000, deadline - Date.now()));
        assumeOut = '';
        asking = true;
        as.on('data', check);
        as.write(line);
        check();
      }),
    kill: async () => {
      q.close();
      a.close();
      d.close();
      as.destroy();
      await kill();
    },
  };
}

/**
 * Loads a saved machine into one started with `-S -incoming defer`, plugs in `devices` once it is
 * loaded (paused), and runs it.
 */
export async function resumeIncoming(m: Machine, f: MachineFiles, stateFile: string, devices: object[], phases: Record<string, number> = {}): Promise<void> {
  let t = performance.now();
  await m.qmp('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
  // QEMU may start no process (its sandbox): it listens, and this process sends it the file.
  const sock = path.join(f.dir, "incoming.sock");
  await rm(sock, { force: true });
  await m.qmp('migrate-incoming', { uri: `unix:${sock}` });
  const sent = new Promise<void>((resolve, reject) => {
    const s = net.connect(sock, () => pipeline(createReadStream(stateFile), s).then(resolve, reject));
    s.once('error', reject);
  });
  sent.catch(() => undefined);
  for (;;) {
    const st = await m.qmp<{ status: string }>('query-status');
    if (st.status === 'paused' || st.status === 'postmigrate') break;
    if (st.status !== 'inmigrate') throw new Error(`the snapshot did not load (status ${st.status})`);
    if (Date.now() > m.deadline) throw new Error('the snapshot did not load in time');
    await sleep(5);
  }
  await sent.catch(() => undefined);
  await rm(sock, { force: true });
  phases.load_ms = performance.now() - t;
  t = performance.now();
  for (const d of devices) await m.qmp('device_add', d);
  await m.qmp('cont');
  phases.plug_ms = performance.now() - t;
}


/**
 * Connects to the control, agent, data and assume sockets of a machine an earlier server process
 * started (the assume port only to be connected: see Machine.assumePort; null if it cannot be).
 */
export async function connectMachine(f: MachineFiles): Promise<{ qmpCh: JsonLineChannel; agent: JsonLineChannel; data: DataChannel; assumePort: net.Socket | null }> {
  const qmpCh = await connectQmp(f.qmp);
  const agent = await connectAgent(f.agent).catch((err) => (qmpCh.close(), Promise.reject(err)));
  const data = await DataChannel.connect(f.data).catch((err) => (qmpCh.close(), agent.close(), Promise.reject(err)));
  const assumePort = await new Promise<net.Socket | null>((resolve) => {
    const sock = net.connect(f.assume, () => resolve(sock));
    sock.once('error', () => resolve(null));
  });
  assumePort?.on('error', () => undefined);
  return { qmpCh, agent, data, assumePort };
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The pid in the machine's pid file, if that process is alive and is this machine's QEMU: its command
 * line names the machine's directory (a recycled pid is never taken for it), by that name or, for a VM
 * that started as a standby (its directory a link to the standby's), by the standby's.
 */
export async function machinePid(f: MachineFiles): Promise<number | null> {
  const pid = Number((await readFile(f.pid, 'utf8').catch(() => '')).trim());
  if (!pid || !pidAlive(pid)) return null;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (cmdline.includes(f.dir + path.sep)) return pid;
  const real = await realpath(f.dir).catch(() => f.dir);
  return real !== f.dir && cmdline.includes(real + path.sep) ? pid : null;
}

/** Kills the machine's QEMU if `pid` still is it, and waits (up to 5 s) for it to be gone. */
export async function killMachine(f: MachineFiles, pid: number): Promise<void> {
  if ((await machinePid(f)) !== pid) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  for (let i = 0; i < 250 && pidAlive(pid); i++) await sleep(20);
}

/**
 * Why a running machine ended, once its process is gone: `exitReason` for our own child; for an
 * adopted QEMU (not our child) its control socket closing is how its end shows.
 */
export async function machineEnded(pid: number, qmpCh: JsonLineChannel, exitReason: Promise<string>): Promise<string> {
  const reason = await Promise.race([
    exitReason,
    // For our own child, the exit status (a signal, a code) follows a moment later and says more.
    new Promise<void>((resolve) => qmpCh.once('close', resolve)).then(() =>
      Promise.race([exitReason, sleep(1000).then(() => 'exited (its control socket closed)')]),
    ),
  ]);
  // The socket closes a moment before the process is gone; wait for that, briefly.
  for (let i = 0; i < 100 && pidAlive(pid); i++) await sleep(20);
  return reason;
}

/** The last lines the guest printed on its console and QEMU on its log: what a failed boot reports. */
export async function consoleTail(f: MachineFiles, lines = 5): Promise<string> {
  const text = await readFile(f.console, 'utf8').catch(() => '');
  const log = await readFile(f.log, 'utf8').catch(() => '');
  return `${text}\n${log}`.split('\n').map((l) => l.trim()).filter(Boolean).slice(-lines).join(' | ');
}
