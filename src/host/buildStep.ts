/**
 * An image build's steps in its builder besides RUN (buildShell.ts): a COPY step (copyStep), a
 * WORKDIR's folders (workdirArgv), and the image's last exec in its builder (lastStepArgv), each a
 * script of the image's static BusyBox shell (BUSYBOX_SH), one exec where it can be (under emulation
 * each process in the guest is 25–180 ms).
 */
import path from 'node:path';
import { filesOfSource, joinWorkdir, type Step } from '../domain/dockerfile.ts';
import { UPPER_MODEL, type ExecArgs, type ExecResult } from '../wire/protocol.ts';
import { shellQuote } from '../wire/shellWords.ts';
import { sha256Hex } from '../domain/ids.ts';
import { PROXY_ENV } from '../harness/invoke.ts';
import type { BuilderDisk } from '../vmm/buildLayers.ts';
import type { BuildShell } from './buildShell.ts';
import { DPKG_QUERY_ARGS, parseDpkgQuery, type PackageVersion } from '../image/workstation.ts';

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
 * (relative to the WORKDIR; into a folder where the destination ends in `/` or `.`, is a folder already,
 * or there are several sources), then its `--chown` and `--chmod`; `mark` made first (BUILD_MARK). Answers how many files it copied.
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
  // Into a folder, as Docker: several sources, a destination written as one (`dir/`, `.`, `..`), or one
  // that is a folder in the image already (`WORKDIR /app` then `COPY file /app`).
  let many = step.sources.length > 1 || step.dest.endsWith('/') || /(^|\/)\.\.?$/.test(step.dest);
  if (!many) many = (await exec({ argv: [...BUSYBOX_SH, '[ -d "$1" ]', 'copy', dest] })).exit_code === 0;
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
 * replayed the journal as it mounted its root (about 30 ms of each start under TCG). BusyBox's mount
 * and fsfreeze where it is there (`$bb`: 43 ms under TCG, against 104 for util-linux's), else
 * util-linux's; an image without either is flushed instead.
 */
const FREEZE_ROOT =
  `dev=; for b in /sys/block/sd*; do read -r m < "$b/device/model" && [ "$m" = ${UPPER_MODEL} ] && dev=/dev/\${b##*/}; done; ` +
  `[ -n "$dev" ] && r=/mnt && { [ -d $r ] || { r=/run/agentvm-root && $bb mkdir -p $r; }; } && PATH=/usr/sbin:/usr/bin:/sbin:/bin && $bb mount -t ext4 "$dev" $r && $bb fsfreeze --freeze $r`;

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
 * The image's last script in its builder (one exec, or a step of the build's shell where its RUNs ran:
 * each program is a process or more in the guest): the image's config (`$4`, or one line on stdin)
 * written at `$1`, its WORKDIR `$2` made, its packages listed unless `$3` (the build's start knew them)
 * and unchanged (LIST_PACKAGES), and the root's filesystem frozen (FREEZE_ROOT) for the last layer;
 * BusyBox's programs (`$bb`) where it is there. Prints `ok`, then the packages or `-`.
 */
const LAST_STEP =
  // Shell builtins where they do (a test, read, printf): a process is 50–180 ms of a new guest under emulation.
  `bb=; [ -x ${BUSYBOX} ] && bb=${BUSYBOX}; d=\${1%/*} && { [ -d "$d" ] || $bb mkdir -p "$d"; } && { if [ -n "$4" ]; then c=$4; else IFS= read -r c; fi; } && printf '%s\\n' "$c" > "$1" && ` +
  `{ [ -z "$2" ] || [ -d "$2" ] || $bb mkdir -p "$2"; } && { ${LIST_PACKAGES}; } && { ( ${FREEZE_ROOT} ) || sync; } && echo ok && echo "$pk"`;

/** LAST_STEP as an exec of its own, the config on stdin. */
export function lastStepArgv(configPath: string, workdir: string, startKnown: boolean): string[] {
  return [...BUSYBOX_SH, LAST_STEP, 'config', configPath, workdir, startKnown ? '1' : ''];
}

/** LAST_STEP as a step of the build's shell (buildShell.ts): its command and arguments. */
export function lastStepInShell(configPath: string, workdir: string, startKnown: boolean, config: string): { argv: string[]; args: string[] } {
  return { argv: ['/bin/sh', '-c', LAST_STEP], args: [configPath, workdir, startKnown ? '1' : '', config] };
}

/** What a step changes of the build's state before it runs (ENV, ARG, USER, WORKDIR). */
export function trackStep(state: BuildState, step: Step): void {
  if (step.kind === 'env') for (const [k, v] of step.vars) state.env.set(k, v);
  if (step.kind === 'arg' && !state.env.has(step.name)) state.env.set(step.name, step.value ?? '');
  if (step.kind === 'user') state.user = step.user;
  if (step.kind === 'workdir') state.workdir = joinWorkdir(state.workdir, step.path);
}

/** A step of the build with its cache key: steps that change files (`fs`) have a layer under that key. */
export type PlannedStep = { step: Step; key: string; fs: boolean };

/** Each step's cache key: its parent's key, its text, what it copies, and the build arguments it sees. */
export function planSteps(steps: Step[], parentKey: string, context: Record<string, string>): PlannedStep[] {
  let key = parentKey;
  const args: string[] = [];
  return steps.map((step) => {
    if (step.kind === 'arg') args.push(`${step.name}=${step.value ?? ''}`);
    const inputs = step.kind === 'copy' ? step.sources.flatMap((s) => filesOfSource(s, Object.keys(context)).map((f) => `${f}:${sha256Hex(context[f])}`)) : [];
    key = sha256Hex(`${key}\n${step.text}\n${inputs.join(',')}\n${step.kind === 'run' ? args.join(',') : ''}`);
    return { step, key, fs: step.kind === 'run' || step.kind === 'copy' || step.kind === 'workdir' };
  });
}


const BUILD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * A step's environment: the gateway as its proxy (as every run has: apt, curl, git, npm and pip reach
 * what the build's egress allows through it), then the build's ENV and ARGs.
 */
export function stepEnv(state: BuildState, uid: number): Record<string, string> {
  return { ...PROXY_ENV, PATH: BUILD_PATH, HOME: uid === 0 ? '/root' : `/home/${state.user.split(':')[0]}`, DEBIAN_FRONTEND: 'noninteractive', ...Object.fromEntries(state.env) };
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
  /** The shell the build's RUN steps run in (buildShell.ts), once one ran. */
  shell: BuildShell | null;
  /** The pid of the shell its builder kept ready started (buildShell.ts BUILD_SHELL), if it was kept ready. */
  keptPid: number | null;
}
