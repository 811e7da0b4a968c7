/**
 * A program on a data-port stream with its stdin, stdout and stderr apart (E2B's processes), started
 * by the agent itself: no login shell and no interpreter in between, so a command costs its own start
 * and nothing more. The frames are protocol.ts ProcessOpen's. It runs as the shell's user (or root),
 * with the shell's environment under its own, in a session and process group of its own; a signal the
 * host sends goes to that group, and a stream the host cuts hangs the group up. A stream that goes
 * because its host did (the VM suspended, the server restarted: the host never cut it) leaves the
 * program running: a host may follow it again on a new stream (attachProcess), output from then on.
 * Node built-ins only: bundled into the guest agent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import os from 'node:os';
import { asImageAsks } from './imageConfig.ts';
import { HANGUP_GRACE_MS, harnessLogin } from './shell.ts';
import { dataPort } from './dataPort.ts';
import { keepReady, loginCommand, takeReady } from './readyShell.ts';
import { STREAM_WINDOW } from '../wire/frames.ts';
import { E2B_HOME, type ShellOpenArgs, type ProcessOpen } from '../wire/protocol.ts';
import type { MuxStream } from '../wire/muxStream.ts';


const isDir = (dir: string) => fsp.stat(dir).then((s) => s.isDirectory(), () => false);

function frame(type: string, data: Buffer | string): Buffer {
  const body = typeof data === 'string' ? Buffer.from(data) : data;
  return Buffer.concat([Buffer.from(type + body.length.toString(16).padStart(8, '0')), body]);
}

function checked(p: ProcessOpen): ProcessOpen {
  const strings = (v: unknown) => Array.isArray(v) && v.every((a) => typeof a === 'string');
  if (!strings(p?.argv) || p.argv.length === 0) throw new Error('process.argv must be a non-empty array of strings');
  const env = p.env ?? {};
  if (typeof env !== 'object' || !Object.values(env).every((v) => typeof v === 'string')) throw new Error('process.env must map names to strings');
  if (p.cwd !== null && p.cwd !== undefined && typeof p.cwd !== 'string') throw new Error('process.cwd must be a string or null');
  if (p.meta !== undefined && (typeof p.meta !== 'string' || p.meta.length > 16 * 1024)) throw new Error('process.meta must be a string of at most 16 KiB');
  return { argv: p.argv, env, cwd: p.cwd ?? null, root: p.root === true, stdin: p.stdin === true, meta: p.meta ?? '' };
}

/** `process_attach` (protocol 8): a program ProcessOpen started, followed on a new stream. */
export type ProcessAttachArgs = { pid: number; stream: number };

/** The programs openProcess started that still run, by pid. */
const running = new Map<number, { meta: string; attach: (stream: MuxStream) => void }>();

/** `process_list`: the programs started here that still run, with the host's words on each. */
export function listProcesses(): { processes: { pid: number; meta: string }[] } {
  return { processes: [...running].map(([pid, p]) => ({ pid, meta: p.meta })) };
}

/**
 * `process_attach`: the program's frames go on `stream` from now on (its earlier stream is let go
 * here without a word: its host is gone), and `stream` carries its input. Output still waiting for
 * the earlier stream's credit is lost with it.
 */
export async function attachProcess(args: ProcessAttachArgs): Promise<{ attached: boolean }> {
  const p = running.get(args?.pid);
  if (!p) return { attached: false };
  const { mux } = await dataPort();
  if (!Number.isInteger(args.stream) || args.stream <= 0 || mux.has(args.stream)) throw new Error('process_attach needs a stream id not in use');
  p.attach(mux.open(args.stream));
  return { attached: true };
}

/** Starts `args.process` on data stream `args.stream`; answers its pid once it runs. */
export async function openProcess(args: ShellOpenArgs, env: Record<string, string>): Promise<{ pid: number; framed: true }> {
  const p = checked(args.process!);
  const { mux } = await dataPort();
  if (mux.has(args.stream)) throw new Error(`stream ${args.stream} is in use`);
  const how = asImageAsks(harnessLogin(), env);
  if (p.root) {
    how.uid = 0;
    how.gid = 0;
    how.env = { ...how.env, HOME: '/root', USER: 'root', LOGNAME: 'root' };
  }
  let stream = mux.open(args.stream);
  const send = (type: string, data: Buffer | string) => stream.write(frame(type, data)).catch(() => undefined);

  // A directory that is not there fails the program as a shell's `cd` would, after its start.
  const cwd = p.cwd ?? ((await isDir(E2B_HOME)) ? E2B_HOME : how.cwd);
  const refuse = async (message: string, code: number) => {
    void send('P', '0');
    void send('E', `${message}\n`);
    await send('X', String(code << 8));
    stream.end({ exit_code: code, signal: null });
    return { pid: 0, framed: true as const };
  };
  if (!(await isDir(cwd))) return refuse(`cwd ${cwd}: No such file or directory`, 1);

  // `bash -l -c CMD` goes to a login shell kept ready (readyShell.ts), if one of this user and environment waits.
  const command = loginCommand(p.argv);
  const taken = command === null ? null : takeReady(how, p.env, command, cwd, p.stdin);
  let child: ChildProcess;
  if (taken) child = taken.child;
  else {
    child = spawn(p.argv[0], p.argv.slice(1), {
      cwd,
      env: { ...how.env, ...p.env, PWD: cwd },
      uid: how.uid,
      gid: how.gid,
      detached: true,
      stdio: [p.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    const spawned = await new Promise<Error | null>((resolve) => {
      child.once('spawn', () => resolve(null));
      child.once('error', (err) => resolve(err));
    });
    if (spawned) {
      const code = (spawned as NodeJS.ErrnoException).code === 'EACCES' ? 126 : 127;
      return refuse(`${p.argv[0]}: ${(spawned as NodeJS.ErrnoException).code === 'ENOENT' ? 'command not found' : spawned.message}`, code);
    }
  }
  const pid = child.pid!;
  void send('P', String(pid));
  for (const [type, chunk] of taken?.early ?? []) void send(type, chunk);

  // Output: each pipe's chunks as frames, paused while the host is a window behind.
  let pending = 0;
  const pipes = [
    [child.stdout!, 'O'],
    [child.stderr!, 'E'],
  ] as const;
  for (const [pipe, type] of pipes) {
    pipe.on('data', (chunk: Buffer) => {
      pending += chunk.length;
      if (pending > STREAM_WINDOW) for (const [each] of pipes) each.pause();
      void send(type, chunk).then(() => {
        pending -= chunk.length;
        if (pending < STREAM_WINDOW / 2) for (const [each] of pipes) each.resume();
      });
    });
  }

  const signalGroup = (sig: NodeJS.Signals | number) => {
    try {
      process.kill(-pid, sig);
    } catch {
      // the group is gone
    }
  };

  // Input: D, C and K frames; credit goes back as stdin takes the bytes.
  let input = Buffer.alloc(0);
  let stdinOpen = p.stdin;
  child.stdin?.on('error', () => undefined);
  let over = false;
  const bind = (s: MuxStream) => {
    s.on('data', (chunk: Buffer) => {
      input = input.length ? Buffer.concat([input, chunk]) : Buffer.from(chunk);
      while (input.length >= 9) {
        const type = String.fromCharCode(input[0]);
        const n = parseInt(input.subarray(1, 9).toString('latin1'), 16);
        if (type === 'K') {
          input = input.subarray(9);
          s.consumed(9);
          if (n === 9 || n === 15 || n === 2 || n === 1) signalGroup(n);
          continue;
        }
        if (!Number.isInteger(n) || input.length < 9 + n) break;
        const data = input.subarray(9, 9 + n);
        input = input.subarray(9 + n);
        if (type === 'D' && stdinOpen && child.stdin) child.stdin.write(data, () => s.consumed(9 + n));
        else {
          if (type === 'C' && stdinOpen) {
            stdinOpen = false;
            child.stdin?.end();
          }
          s.consumed(9 + n);
        }
      }
    });
    s.on('abort', (f: { error?: string }) => {
      // Not the stream it has now (attached elsewhere since), or its host went without cutting it: it runs on.
      if (over || s !== stream || f?.error === 'host_gone') return;
      over = true;
      signalGroup('SIGHUP');
      setTimeout(() => signalGroup('SIGKILL'), HANGUP_GRACE_MS).unref();
    });
  };
  bind(stream);
  running.set(pid, {
    meta: p.meta ?? '',
    attach: (next) => {
      const old = stream;
      stream = next;
      input = Buffer.alloc(0);
      bind(next);
      old.cut({ error: 'moved', message: 'the process is followed on another stream' });
      void send('P', String(pid));
      for (const [each] of pipes) each.resume();
    },
  });
  child.on('close', (code, signal) => {
    running.delete(pid);
    const sig = signal ? (os.constants.signals[signal] ?? 0) : 0;
    const status = signal ? sig : (code ?? 0) << 8;
    void send('X', String(status)).then(() => {
      if (!over) stream.end({ exit_code: code, signal });
      over = true;
      // The next such command's shell, started now that this one's answer is on its way (in the
      // login's directory: where it starts is its profile's; its command's is set when it is taken).
      if (command !== null) keepReady(how, how.cwd);
    });
  });
  return { pid, framed: true };
}
