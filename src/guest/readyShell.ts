/**
 * A login shell kept ready for the next E2B command. E2B's SDK runs every command as `/bin/bash -l -c
 * CMD`, and a login bash's start (the binary, the profile) is most of a short command's time under
 * emulation (about 90 ms of a guest's CPU against 60 for `/bin/true`; a few ms under KVM). After such
 * a command ends, the agent starts the next one's shell (`keepReady`): a `bash -l` of the same user and
 * environment that reads its profile at the lowest priority (so it takes only time nothing else in
 * the VM wants) and waits on a pipe (fd 3) for its command. The next
 * `bash -l -c CMD` of that user takes it (`takeReady`): the agent writes CMD with a short prelude to
 * the pipe and the shell `eval`s it, so the command is what `bash -l -c CMD` would run, with the
 * process's pid, pipes, process group and exit status.
 *
 * The prelude puts back what a fresh bash would have that a shell started earlier has not: the
 * command's directory (`cd`, OLDPWD as the environment had it), the host name now (a standby VM's shell
 * was started before its VM took its name), `SECONDS` from 0 and `RANDOM` seeded anew (two VMs branched
 * from one memory must not draw the same numbers), and the variables (the command's own, the
 * sandbox's, the agent's) as they are now. What differs: those variables are set after the profile ran,
 * not before (a command whose own variables a login reads, `PATH` or `HOME`, starts its own shell, so
 * its profile sees them first, as E2B's); bash's messages for a syntax error name `eval` instead of
 * `-c`; and the last simple command is forked rather than `exec`ed by the shell.
 * Node built-ins only: bundled into the guest agent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import os from 'node:os';
import { shellQuote } from '../wire/shellWords.ts';

/** How a process is started: its user, its environment and its directory (imageConfig's ProcessBase). */
export interface Login {
  uid: number;
  gid: number;
  env: Record<string, string>;
}

/** Output a ready shell printed before its command came (a profile's words), handed on with it. */
export type Early = Array<['O' | 'E', Buffer]>;

interface Ready {
  key: string;
  env: Record<string, string>;
  child: ChildProcess;
  early: Early;
  size: number;
}

const BASH = '/bin/bash';
/**
 * What the kept shell runs: reads its command's length in bytes and a space, then the command, on fd 3;
 * closes it; runs the command. `read -N` reads a pipe in blocks (`-d` a byte a call: 100,000 reads for
 * a command of 100 KB, as an agent's heredoc that writes a file is), and counts bytes in the C locale.
 */
const BOOT = `IFS= read -r -d ' ' __agentvm_n <&3 && IFS= LC_ALL=C read -r -N "$__agentvm_n" __agentvm_cmd <&3 || exit 1; exec 3<&-; eval "$__agentvm_cmd"`;
/** A profile that prints more than this before the command is not kept: its output would wait too long. */
const EARLY_CAP = 64 * 1024;

/** At most one per user. */
const ready = new Map<number, Ready>();

/**
 * What a ready shell must share with its command: the user, and the variables a login profile reads
 * or sets. Other variables of the agent's (the egress proxy, a harness's, the VM's secrets) that
 * changed since the shell started are exported by the prelude.
 */
const LOGIN_VARIABLES = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'ENV', 'BASH_ENV'];
const keyOf = (l: Login) => JSON.stringify([l.uid, l.gid, ...LOGIN_VARIABLES.map((k) => l.env[k] ?? null)]);

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `export`s and `unset`s that make the shell's environment `to`'s, or null where a shell cannot (a
 * variable whose name is not a shell's: only a program started with it has it).
 */
function envChanges(from: Record<string, string>, to: Record<string, string>): string[] | null {
  const out: string[] = [];
  for (const [k, v] of Object.entries(to)) if (from[k] !== v) out.push(`export ${k}=${shellQuote(v)}`);
  for (const k of Object.keys(from)) if (!(k in to)) out.push(`unset ${k}`);
  const names = [...Object.keys(to), ...Object.keys(from)].filter((k) => from[k] !== to[k]);
  return names.every((k) => NAME.test(k)) ? out : null;
}

/** `bash -l -c CMD` as E2B's SDK sends it: the command a ready shell can take. */
export function loginCommand(argv: string[]): string | null {
  return argv.length === 4 && argv[0] === BASH && argv[1] === '-l' && argv[2] === '-c' ? argv[3] : null;
}

/** Ends a ready shell no longer kept (its caller took it off the map). */
const drop = (r: Ready) => {
  try {
    process.kill(-r.child.pid!, 'SIGKILL');
  } catch {
    // gone already
  }
};

/** Starts a shell for the next command of this login, in `cwd`, unless one is kept; answers the shell kept. */
export function keepReady(login: Login, cwd: string): ChildProcess | null {
  const key = keyOf(login);
  const had = ready.get(login.uid);
  // One kept for the same login serves whatever else changed: takeReady's prelude sets it.
  if (had && had.key === key && had.child.exitCode === null && had.child.signalCode === null) return had.child;
  if (had) {
    ready.delete(login.uid);
    drop(had);
  }
  let child: ChildProcess;
  try {
    child = spawn(BASH, ['-l', '-c', BOOT, BASH], {
      cwd,
      env: { ...login.env, PWD: cwd },
      uid: login.uid,
      gid: login.gid,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
  } catch {
    return null;
  }
  // At the lowest priority until taken: its start uses only time nothing else in the VM wants.
  try {
    os.setPriority(child.pid!, 19);
  } catch {
    // it ended already
  }
  const r: Ready = { key, env: login.env, child, early: [], size: 0 };
  child.once('error', () => ready.get(login.uid) === r && ready.delete(login.uid));
  child.once('exit', () => ready.get(login.uid) === r && ready.delete(login.uid));
  for (const s of child.stdio) (s as NodeJS.EventEmitter | null)?.on('error', () => undefined);
  const hold = (type: 'O' | 'E') => (chunk: Buffer) => {
    r.early.push([type, chunk]);
    r.size += chunk.length;
    if (r.size > EARLY_CAP && ready.get(login.uid) === r) {
      ready.delete(login.uid);
      drop(r);
    }
  };
  child.stdout!.on('data', hold('O'));
  child.stderr!.on('data', hold('E'));
  ready.set(login.uid, r);
  return child;
}

/**
 * The ready shell of this user, given `command` to run in `cwd` with the variables `ownEnv` over the
 * login's, or null (none kept, it ended, or the login's variables are not the shell's: the command's
 * own `PATH`, say, is the profile's to see first).
 */
export function takeReady(login: Login, ownEnv: Record<string, string>, command: string, cwd: string, stdin: boolean): { child: ChildProcess; early: Early } | null {
  const r = ready.get(login.uid);
  if (!r) return null;
  ready.delete(login.uid);
  const env = { ...login.env, ...ownEnv };
  const changes = envChanges(r.env, env);
  if (!changes || r.key !== keyOf({ ...login, env }) || r.child.exitCode !== null || r.child.signalCode !== null) {
    drop(r);
    return null;
  }
  const prelude = [
    'unset __agentvm_cmd __agentvm_n',
    ...changes,
    `CDPATH= builtin cd -- ${shellQuote(cwd)} || exit 1`,
    env.OLDPWD === undefined ? 'unset OLDPWD' : `OLDPWD=${shellQuote(env.OLDPWD)}`,
    ...('HOSTNAME' in env ? [] : [`HOSTNAME=${shellQuote(os.hostname())}`]),
    'SECONDS=0',
    `RANDOM=${randomInt(0, 2 ** 31)}`,
  ].join('; ');
  try {
    os.setPriority(r.child.pid!, os.getPriority());
  } catch {
    // it ended in the meantime: its command will not run, and its end is the process's
  }
  const fd3 = r.child.stdio[3] as NodeJS.WritableStream;
  const script = `${prelude}\n${command}`;
  fd3.end(`${Buffer.byteLength(script)} ${script}`);
  if (!stdin) r.child.stdin!.end();
  r.child.stdout!.removeAllListeners('data');
  r.child.stderr!.removeAllListeners('data');
  return { child: r.child, early: r.early };
}
