/**
 * Shells: a login shell as the harness user on a terminal of its own, its bytes on a data-port
 * stream. The terminal's master side stays here, non-blocking: read as a tty stream (evented), written
 * with plain writes that wait and try again while the terminal's input is full (a tty stream writes a
 * master blocking, which would stall the whole agent behind a program that does not read its input).
 * pty.pl makes the slave side the shell's. Closing the stream ends every process of the shell's
 * session. Node built-ins only: bundled into the guest agent.
 */
import { asImageAsks, type ProcessBase } from './imageConfig.ts';
import { spawn } from 'node:child_process';
import { closeSync, constants, openSync, promises as fsp, write } from 'node:fs';
import tty from 'node:tty';
import PTY_PERL from './pty.pl';
import { HARNESS_HOME, HARNESS_USER, WORKSPACE, type ShellOpenArgs } from '../wire/protocol.ts';
import { dataPort } from './dataPort.ts';
import { STREAM_WINDOW } from '../wire/frames.ts';
import type { MuxStream } from '../wire/muxStream.ts';

const SHELL = '/bin/bash';
/** How long the processes of a closed shell (or a cut process, process.ts) get after SIGHUP before SIGKILL. */
export const HANGUP_GRACE_MS = 1000;

/** The harness user's login, before the image's say (asImageAsks): a shell's and a process's (process.ts) alike. */
export function harnessLogin(): ProcessBase {
  return {
    cwd: WORKSPACE,
    uid: HARNESS_USER.uid,
    gid: HARNESS_USER.gid,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: HARNESS_HOME, USER: HARNESS_USER.name, LOGNAME: HARNESS_USER.name, SHELL, LANG: 'C.UTF-8' },
  };
}

const size = (v: unknown, what: string): number => {
  if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > 1000) throw new Error(`${what} must be an integer from 1 to 1000`);
  return v as number;
};

/** Pids of the processes of a session (field 6 of /proc/PID/stat). */
async function sessionPids(sid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await fsp.readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await fsp.readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[3]) === sid) pids.push(Number(entry));
  }
  return pids;
}

async function signalSession(sid: number, signal: NodeJS.Signals): Promise<number> {
  const pids = await sessionPids(sid);
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile
    }
  }
  return pids.length;
}

/**
 * Sets the terminal's size (TIOCSWINSZ on the master, passed as descriptor 3: as a child's stdin it
 * would be made blocking, and the agent reads it non-blocking); its foreground programs get SIGWINCH.
 */
function resize(master: number, cols: number, rows: number): Promise<void> {
  return new Promise((resolve) => {
    const set = 'open(my $m, "+<&=", 3) or exit 1; my $w = pack("S4", $ARGV[0], $ARGV[1], 0, 0); ioctl($m, 0x5414, $w) or exit 1';
    const p = spawn('perl', ['-e', set, String(rows), String(cols)], {
      stdio: ['ignore', 'ignore', 'ignore', master],
    });
    p.on('error', () => resolve());
    p.on('exit', () => resolve());
  });
}

/** Starts a shell on a new terminal; its bytes flow on data stream `args.stream` until it exits or the stream is cut. */
export async function openShell(args: ShellOpenArgs, env: Record<string, string>): Promise<{ pid: number; tty: string }> {
  const cols = size(args?.cols, 'cols');
  const rows = size(args?.rows, 'rows');
  const { mux } = await dataPort();
  if (mux.has(args.stream)) throw new Error(`stream ${args.stream} is in use`);
  const master = openSync('/dev/ptmx', constants.O_RDWR | constants.O_NOCTTY | constants.O_NONBLOCK);
  const login = harnessLogin();
  const how = asImageAsks({ ...login, env: { ...login.env, TERM: 'xterm-256color' } }, env);
  const child = spawn('perl', ['-e', PTY_PERL, String(how.uid), String(how.gid), String(cols), String(rows), how.cwd, SHELL], {
    env: how.env,
    stdio: ['ignore', 'ignore', 'pipe', master],
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
    child.on('error', () => resolve({ code: 127, signal: null }));
  });
  let ttyName: string;
  try {
    ttyName = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (c: string) => (text += c));
      child.stderr!.on('end', () => {
        const m = /^ready (\S+)/.exec(text);
        if (m) resolve(m[1]);
        else reject(new Error(`the shell did not start: ${text.trim() || 'no word from its terminal program'}`));
      });
    });
  } catch (err) {
    closeSync(master);
    throw err;
  }

  const stream = mux.open(args.stream);
  const term = new tty.ReadStream(master);
  let pending = 0;
  let over = false;
  term.on('data', (chunk: Buffer) => {
    pending += chunk.length;
    if (pending > STREAM_WINDOW) term.pause();
    stream.write(chunk).then(
      () => {
        pending -= chunk.length;
        if (term.isPaused() && pending < STREAM_WINDOW / 2 && !over) term.resume();
      },
      () => undefined,
    );
  });
  // EIO: every holder of the slave side closed it (the shell exited); the output before it is all read.
  const drained = new Promise<void>((resolve) => {
    term.on('error', () => resolve());
    term.on('end', () => resolve());
    term.on('close', () => resolve());
  });
  // Keystrokes, in order, one write at a time; the writer gets credit back as they land.
  const input: Buffer[] = [];
  let typing = false;
  const type = () => {
    if (typing || over || input.length === 0) return;
    typing = true;
    const chunk = input[0];
    write(master, chunk, 0, chunk.length, null, (err, n) => {
      typing = false;
      if (over) return;
      if (err?.code === 'EAGAIN') return void setTimeout(type, 10);
      if (err) return void input.splice(0);
      if (n < chunk.length) input[0] = chunk.subarray(n);
      else input.shift();
      stream.consumed(n);
      type();
    });
  };
  stream.on('data', (chunk: Buffer) => {
    if (over) return;
    input.push(Buffer.from(chunk));
    type();
  });
  stream.on('control', (msg: { type?: string; cols?: unknown; rows?: unknown }) => {
    if (msg.type !== 'resize' || over) return;
    try {
      void resize(master, size(msg.cols, 'cols'), size(msg.rows, 'rows'));
    } catch {
      // a bad size is ignored, as a terminal would
    }
  });

  const pid = child.pid!;
  const finish = async (how: 'exited' | 'cut') => {
    if (over) return;
    over = true;
    if (how === 'cut') {
      // The other side is gone: hang the session up, then kill what is left of it.
      await signalSession(pid, 'SIGHUP');
      setTimeout(() => void signalSession(pid, 'SIGKILL'), HANGUP_GRACE_MS);
    } else {
      // Background jobs left behind by the shell are hung up like a closed terminal's.
      await signalSession(pid, 'SIGHUP');
    }
    term.destroy();
  };
  stream.on('abort', () => void finish('cut'));
  void exit.then(async (e) => {
    // What the shell printed last is still on its way out: wait for it, briefly.
    await Promise.race([drained, new Promise((r) => setTimeout(r, 500))]);
    await stream.write(Buffer.alloc(0)).catch(() => undefined);
    if (!over) stream.end({ exit_code: e.code, signal: e.signal });
    await finish('exited');
  });
  return { pid, tty: ttyName };
}
