/**
 * A RUN step of an image build with its output streamed: the builder's agent starts the step as a
 * program on a stream of the VM's data port (wire/processFrames.ts), so each line it prints (stdout and
 * stderr, as a terminal shows them) reaches the build's log as it comes, at most `capBytes` of it, the
 * rest counted. One process in the guest besides the step's own: the shell that goes to its WORKDIR
 * (made where missing), drops to its USER (`setpriv`) and flushes the filesystems at its end (under
 * emulation each process is 50–180 ms). Also here: a COPY step (copyStep) and the image's last exec in
 * its builder (lastStepArgv).
 */
import path from 'node:path';
import type { GuestShell } from '../domain/guestAccess.ts';
import { filesOfSource, joinWorkdir, type Step } from '../domain/dockerfile.ts';
import { UPPER_MODEL, type ExecArgs, type ExecResult, type ProcessOpen } from '../wire/protocol.ts';
import { processFrame, ProcessFrameReader, waitStatus } from '../wire/processFrames.ts';
import type { BuilderDisk } from '../vmm/buildLayers.ts';
import { DPKG_QUERY_ARGS, parseDpkgQuery, type PackageVersion } from '../image/workstation.ts';

/** A value as one word for sh. */
function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Starts a program in the builder on a stream of its data port. */
export type BuilderProcess = (p: ProcessOpen) => Promise<GuestShell>;

export interface StreamedStep {
  /** The step's command, run as `ids` in `cwd` (made when missing) with `env`. */
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  ids: { uid: number; gid: number };
  timeoutMs: number;
  capBytes: number;
  /** Flush the machine's filesystems at its end (an image build takes the step's layer next). */
  sync?: boolean;
  /** A file made before it runs, when missing (BUILD_MARK). */
  mark?: string;
}

export interface StepOutcome {
  exitCode: number | null;
  timedOut: boolean;
  /** Bytes printed beyond the cap (not kept). */
  droppedBytes: number;
  /** The last lines it printed (past the cap too). */
  tail: string[];
  /** Why its stream ended before the step did (its builder went, the stream was cut); null when it ended. */
  cut: string | null;
}

/**
 * The builder's own scripts (never a step's: a RUN is `/bin/sh -c` as Docker runs it) run in the
 * image's static BusyBox shell, whose commands are its own, run without a program's start (a shell
 * and a `sync` 29 ms under TCG, against 92 ms for dash and coreutils' `sync`; a dynamically linked
 * program's start is 20–25 ms more than a static one's); withoutBusybox is the fallback for an image
 * that removed it.
 */
export const BUSYBOX = '/bin/busybox';
export const BUSYBOX_SH = [BUSYBOX, 'sh', '-c'];

/** The same script under /bin/sh, when `r` says the builder has no BusyBox (its start failed); else null. */
export function withoutBusybox(argv: string[], r: ExecResult): string[] | null {
  if (argv[0] !== BUSYBOX || r.exit_code !== 127 || !r.stderr.startsWith(`spawn ${BUSYBOX} `)) return null;
  return argv[1] === 'sh' ? ['/bin/sh', ...argv.slice(2)] : argv.slice(1);
}

/**
 * Made (a shell builtin's redirection: no process) by a build's first RUN or COPY before it writes, in
 * the builder's /run (a tmpfs, never in a layer): Debian's package database older than it was not
 * changed by the build (lastStepArgv).
 */
export const BUILD_MARK = '/run/agentvm-build.mark';
/** Makes the mark `$1` when it is missing (none when empty), then drops it from the arguments. */
const MARK_FIRST = '{ [ -z "$1" ] || [ -e "$1" ] || : > "$1"; }; shift; ';
/** After the mark (MARK_FIRST): `$1` the WORKDIR (made where missing), `$2` whether to sync at the end; its status is the command's. */
const PROLOGUE = `${MARK_FIRST}{ [ -d "$1" ] || mkdir -p -- "$1"; } && cd -- "$1" || exit 1; __avm_sync=$2; shift 2; `;
const EPILOGUE = `__avm_status=$?; [ -z "$__avm_sync" ] || { [ -x ${BUSYBOX} ] && ${BUSYBOX} sync; } || sync; exit $__avm_status`;
/** Then the command, as a program of its own. */
const STEP_PROGRAM = `${PROLOGUE}"$@"; ${EPILOGUE}`;
/**
 * Then a shell form's script (`$1`) in a subshell, as `sh -c` runs it (no arguments, no options set)
 * but a fork of this shell, not a new program: one process less per step.
 */
const STEP_SCRIPT = `${PROLOGUE}__avm_script=$1; shift; ( eval "$__avm_script" ); ${EPILOGUE}`;

/** The argv the builder's agent starts (as root) for a step. */
export function stepArgv(s: StreamedStep): string[] {
  const { uid, gid } = s.ids;
  const head = ['/bin/sh', '-c'];
  if (uid === 0 && gid === 0 && s.argv.length === 3 && s.argv[0] === '/bin/sh' && s.argv[1] === '-c') {
    return [...head, STEP_SCRIPT, 'step', s.mark ?? '', s.cwd || '/', s.sync ? '1' : '', s.argv[2]];
  }
  const drop = uid === 0 && gid === 0 ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${gid}`, '--init-groups', '--'];
  return [...head, STEP_PROGRAM, 'step', s.mark ?? '', s.cwd || '/', s.sync ? '1' : '', ...drop, ...s.argv];
}

/** Whole lines of `bytes` after a partial line held from before; answers them and the new partial line. */
export function splitLines(held: Buffer, bytes: Buffer): { lines: string[]; rest: Buffer } {
  const all = held.length ? Buffer.concat([held, bytes]) : bytes;
  const lines: string[] = [];
  let start = 0;
  for (let i = all.indexOf(10); i !== -1; i = all.indexOf(10, start)) {
    lines.push(all.subarray(start, i).toString('utf8').replace(/\r$/, ''));
    start = i + 1;
  }
  return { lines, rest: Buffer.from(all.subarray(start)) };
}

/** A line as a terminal leaves it: of a carriage-return's progress, its last state ('' for none). */
const shown = (text: string) => (text.includes('\r') ? text.split('\r').filter(Boolean).at(-1) ?? '' : text);

/**
 * Runs the step, calling `line` with each line it prints (within the cap) as soon as it comes; the
 * guest is held back while `line` works (the stream's window). Resolves when the step ended.
 */
export async function runStreamed(open: BuilderProcess, s: StreamedStep, line: (text: string) => Promise<void>): Promise<StepOutcome> {
  const shell = await open({ argv: stepArgv(s), env: s.env, cwd: '/', root: true, stdin: false });
  if (!shell.framed) {
    shell.close();
    throw new Error("the builder's agent cannot start a program on a stream (an agent older than the image's)");
  }
  const frames = new ProcessFrameReader();
  const tail: string[] = [];
  // Per stream: the bytes of a line not ended yet, within the cap and in all.
  const held = { O: { kept: Buffer.alloc(0), all: Buffer.alloc(0) }, E: { kept: Buffer.alloc(0), all: Buffer.alloc(0) } };
  let kept = 0;
  let dropped = 0;
  let status: number | null = null;
  const remember = (text: string) => {
    const seen = shown(text);
    if (!seen) return;
    tail.push(seen.slice(0, 1000));
    if (tail.length > 5) tail.shift();
  };
  const take = async (h: { kept: Buffer; all: Buffer }, data: Buffer) => {
    const all = splitLines(h.all, data);
    all.lines.forEach(remember);
    h.all = all.rest.length > 4096 ? all.rest.subarray(all.rest.length - 4096) : all.rest;
    const keep = data.subarray(0, Math.max(0, s.capBytes - kept));
    kept += keep.length;
    dropped += data.length - keep.length;
    if (!keep.length) return;
    const split = splitLines(h.kept, keep);
    h.kept = split.rest;
    for (const seen of split.lines.map(shown)) if (seen) await line(seen);
  };
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    shell.write(processFrame('K', 9)).catch(() => undefined);
  }, s.timeoutMs);
  let work = Promise.resolve();
  shell.output((chunk, done) => {
    work = work.then(async () => {
      for (const f of frames.push(chunk)) {
        if (f.type === 'O' || f.type === 'E') await take(held[f.type], f.data);
        else if (f.type === 'X') status = Number(f.data.toString());
      }
    }).finally(done);
  });
  let cut: string | null = null;
  try {
    const end = await shell.ended;
    if (end.kind === 'cut') cut = end.message;
    await work;
  } finally {
    clearTimeout(timer);
    shell.close();
  }
  // What was left without a newline at the end is a line too.
  for (const h of [held.O, held.E]) {
    remember(h.all.toString('utf8'));
    const seen = shown(h.kept.toString('utf8'));
    if (seen) await line(seen);
  }
  // No status: the program did not end on its own (its VM went, or its stream was cut).
  const exitCode = timedOut || status === null ? null : waitStatus(status).exitCode;
  return { exitCode, timedOut, droppedBytes: dropped, tail, cut: status === null && !timedOut ? (cut ?? 'its stream ended with no status') : null };
}

/**
 * A WORKDIR step: its folder made with the folders above it that are missing, those it made given to
 * `owner` (`uid:gid`; none: root's), as BuildKit does for the USER of the moment.
 */
export function workdirArgv(dir: string, owner: string): string[] {
  const script =
    'd=$1; o=$2; set --; p=$d; while [ -n "$p" ] && [ ! -d "$p" ]; do set -- "$p" "$@"; p=${p%/*}; done; ' +
    'mkdir -p -- "$d" && { [ -z "$o" ] || [ $# -eq 0 ] || chown -- "$o" "$@"; }';
  return [...BUSYBOX_SH, script, 'workdir', dir, owner];
}

/** Bytes of a file written into the builder per exec (base64 on the guest channel). */
const COPY_CHUNK = 512 * 1024;
/**
 * Small files go several to an exec, each as two arguments (its path, its bytes in base64): a file at
 * most ARG_FILE long in base64 (the kernel takes an argument of up to 128 KiB), ARG_BATCH of them at
 * most an exec. Each exec is 40–60 ms under TCG: a COPY of 50 small files took 50 of them.
 */
const ARG_FILE = 96 * 1024;
const ARG_BATCH = 1024 * 1024;
const WRITE_SMALL = `${MARK_FIRST}while [ $# -gt 0 ]; do d=\${1%/*}; { [ -z "$d" ] || [ -d "$d" ] || mkdir -p "$d"; } && printf '%s' "$2" | base64 -d > "$1" || exit 1; shift 2; done`;

/**
 * A COPY step: each file of the build's context its sources name, written as root into the builder
 * (relative to the WORKDIR; into a folder where the destination ends in `/` or there are several
 * sources), then its `--chown` and `--chmod`; `mark` made first (BUILD_MARK). Answers how many files it copied.
 */
export async function copyStep(
  exec: (args: Omit<ExecArgs, 'uid' | 'gid' | 'env'>) => Promise<ExecResult>,
  step: Extract<Step, { kind: 'copy' }>,
  workdir: string,
  context: Record<string, string>,
  mark = BUILD_MARK,
): Promise<number> {
  const names = Object.keys(context);
  const targets: string[] = [];
  const dest = step.dest.startsWith('/') ? step.dest : joinWorkdir(workdir || '/', step.dest);
  const many = step.sources.length > 1 || step.dest.endsWith('/');
  const failed = (r: ExecResult, what: string) => new Error(`line ${step.line}: copying ${what} failed: ${r.stderr.trim().slice(0, 200)}`);
  let batch: string[] = [];
  let batchBytes = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const r = await exec({ argv: [...BUSYBOX_SH, WRITE_SMALL, 'copy', mark, ...batch] });
    if (r.exit_code !== 0) throw failed(r, `${batch.length / 2} file${batch.length === 2 ? '' : 's'}`);
    batch = [];
    batchBytes = 0;
  };
  for (const source of step.sources) {
    const dir = source.replace(/\/+$/, '').replace(/^\.\/?/, '');
    for (const file of filesOfSource(source, names)) {
      const isDir = file !== dir;
      const target = isDir ? path.posix.join(dest, file.slice(dir === '' ? 0 : dir.length + 1)) : many ? path.posix.join(dest, path.posix.basename(file)) : dest;
      targets.push(target);
      if (context[file].length <= ARG_FILE) {
        if (batchBytes + context[file].length > ARG_BATCH) await flush();
        batch.push(target, context[file]);
        batchBytes += context[file].length + target.length;
        continue;
      }
      // A small file of the same path before it lands first (the last one named wins, as in Docker).
      if (batch.some((x, i) => i % 2 === 0 && x === target)) await flush();
      const bytes = Buffer.from(context[file], 'base64');
      for (let off = 0; off < bytes.length; off += COPY_CHUNK) {
        const chunk = bytes.subarray(off, off + COPY_CHUNK).toString('base64');
        const r = await exec({ argv: [...BUSYBOX_SH, `${MARK_FIRST}mkdir -p "$(dirname "$1")" && base64 -d ${off === 0 ? '>' : '>>'} "$1"`, 'copy', mark, target], stdin: chunk });
        if (r.exit_code !== 0) throw failed(r, `${file} to ${target}`);
      }
    }
  }
  await flush();
  const fix = [step.chown ? `chown -h ${shellQuote(step.chown)} "$@"` : '', step.chmod ? `chmod ${step.chmod} "$@"` : ''].filter(Boolean).join(' && ');
  // The paths as arguments too, ARG_BATCH of them at most an exec.
  for (let i = 0; fix && i < targets.length; ) {
    const some = [targets[i++]];
    let bytes = some[0].length;
    while (i < targets.length && bytes + targets[i].length < ARG_BATCH) {
      bytes += targets[i].length + 1;
      some.push(targets[i++]);
    }
    const r = await exec({ argv: [...BUSYBOX_SH, fix, 'copy', ...some] });
    if (r.exit_code !== 0) throw new Error(`line ${step.line}: ${r.stderr.trim().slice(0, 200)}`);
  }
  return targets.length;
}

/**
 * Freezes the builder's root filesystem (the ext4 of its root layer, reached by mounting its disk once
 * more: after the guest's pivot it has no path). A frozen ext4 is whole on its disk with its journal
 * emptied, so the layer taken then needs no recovery: captured while it ran, every VM of the image
 * replayed the journal as it mounted its root (about 30 ms of each start under TCG). An image without
 * the tools (util-linux's mount and fsfreeze) is flushed instead.
 */
const FREEZE_ROOT =
  `dev=; for b in /sys/block/sd*; do read -r m < "$b/device/model" && [ "$m" = ${UPPER_MODEL} ] && dev=/dev/\${b##*/}; done; ` +
  `[ -n "$dev" ] && r=/mnt && { [ -d $r ] || { r=/run/agentvm-root && mkdir -p $r; }; } && PATH=/usr/sbin:/usr/bin:/sbin:/bin && mount -t ext4 "$dev" $r && fsfreeze --freeze $r`;

/**
 * The image's packages: Debian's installed ones, as the base image's manifest lists them (its npm is
 * not Debian's). `-` when the build did not change Debian's package database: the files dpkg writes
 * (its status, renamed into its folder) are older than BUILD_MARK, made before the first RUN.
 */
const LIST_PACKAGES =
  `if [ -n "$3" ] && [ /var/lib/dpkg/status -ot ${BUILD_MARK} ] && [ /var/lib/dpkg -ot ${BUILD_MARK} ]; then pk=-; ` +
  `else pk=$(dpkg-query ${DPKG_QUERY_ARGS.map(shellQuote).join(' ')} || true); fi`;

/** Lists them all (a build whose config layer was cached but not its packages). */
export const LIST_PACKAGES_ARGV = ['dpkg-query', ...DPKG_QUERY_ARGS];

/** The packages lastStepArgv printed after its `ok`: null for `-`, unchanged since the build's start. */
export function parsePackages(out: string): PackageVersion[] | null {
  return out.trim() === '-' ? null : parseDpkgQuery(out);
}

/**
 * The argv of an image's last exec in its builder (one exec: each is a process or more in the guest):
 * the image's config, given on stdin as one line, written at `configPath`, its WORKDIR made, its
 * packages listed unless `startKnown` and unchanged (LIST_PACKAGES), and the root's filesystem frozen
 * (FREEZE_ROOT) for the last layer. Prints `ok`, then the packages or `-`.
 */
export function lastStepArgv(configPath: string, workdir: string, startKnown: boolean): string[] {
  // Shell builtins where they do (a test, read, printf): a process is 50–180 ms of a new guest under emulation.
  const script =
    `d=\${1%/*} && { [ -d "$d" ] || mkdir -p "$d"; } && IFS= read -r c && printf '%s\\n' "$c" > "$1" && { [ -z "$2" ] || [ -d "$2" ] || mkdir -p "$2"; } && ` +
    `{ ${LIST_PACKAGES}; } && { ( ${FREEZE_ROOT} ) || sync; } && echo ok && echo "$pk"`;
  return [...BUSYBOX_SH, script, 'config', configPath, workdir, startKnown ? '1' : ''];
}

/** Where a build's time goes (its log line): the builder's start, the steps, the layers taken, the config. */
export function buildPhases() {
  const phases = { builder_ms: 0, steps_ms: 0, capture_ms: 0, config_ms: 0 };
  const timed = async <T,>(phase: keyof typeof phases, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    try {
      return await fn();
    } finally {
      phases[phase] += Math.round(performance.now() - t);
    }
  };
  return { phases, timed };
}

/** The build's running state: its builder VM (once needed), the user RUN steps run as, the env. */
export interface BuildState {
  vmId: string | null;
  env: Map<string, string>;
  workdir: string;
  user: string;
  /** The layer the builder's root started from, and the newest captured since. */
  startLayer: string | null;
  layer: string | null;
  /** The builder's filesystems were flushed since its last change (a RUN flushes at its end). */
  synced: boolean;
  /** The uid and gid of each USER the build looked up (once a build: a RUN after USER costs no lookup). */
  idsOf: Map<string, { uid: number; gid: number }>;
  /** The builder's root disk, as its layers are taken. */
  disk: BuilderDisk;
  /** Resolves once every layer taken is whole and in the cache. */
  saved: Promise<void>;
}
