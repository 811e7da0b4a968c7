/**
 * A RUN step of an image build with its output streamed: the step writes what it prints (stdout and
 * stderr together, as a terminal shows them) to a file in the builder's /run (a tmpfs, so nothing of
 * it lands in the step's layer), at most `capBytes` of it, the rest counted; while it runs the host
 * reads what is new each `pollMs` and hands on each whole line as it comes. So a build's log is live,
 * line by line, not a step's output at its end. A step that prints little and ends before the first
 * look costs the builder one exec: its output comes back with its status (under emulation each exec
 * is a process or more in the guest, 50–180 ms each). Also here: the image's last exec in its builder
 * (lastStepArgv).
 */
import { UPPER_MODEL, type ExecArgs, type ExecResult } from '../wire/protocol.ts';

/** A value as one word for sh. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Where the builder keeps the output of its running step. */
export const STEP_DIR = '/run/agentvm-build';

export interface StreamedStep {
  /** The step's command, run as `ids` in `cwd` with `env`. */
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  ids: { uid: number; gid: number };
  timeoutMs: number;
  capBytes: number;
  /** A name of the step's files, unique in the build. */
  name: string;
  /** Where its files go: STEP_DIR unless said. */
  dir?: string;
  /** Flush the machine's filesystems at its end (an image build takes the step's layer next). */
  sync?: boolean;
}

export interface StepOutcome {
  exitCode: number | null;
  timedOut: boolean;
  /** Bytes printed beyond the cap (not kept). */
  droppedBytes: number;
  /** The last lines it printed. */
  tail: string[];
}

/** Runs one request in the builder; root unless the args say otherwise. */
export type BuilderExec = (args: ExecArgs, timeoutMs: number) => Promise<ExecResult>;

/** A step's output up to this many bytes comes back with its status, in the step's own exec (no look after it). */
export const WHOLE_BYTES = 32 * 1024;

/**
 * Writes the first N bytes of its input into OUT as they come (the host reads that file while the
 * step runs), reads the rest to the end (so the step is never stopped by a closed pipe) and counts it.
 * At the end: a sync when asked (the step's files on the disk, for its layer), then one line on its
 * own output, `<status> <bytes not kept> <whole>`, the status read from CODE; and when what it kept is
 * at most WHOLE bytes (`whole` 1), those bytes in hex after it, and its files removed. So a step that
 * prints little costs one exec, not a look at its file and a clean-up after it. Core Perl only (no
 * module: an image may have perl-base alone).
 */
const STEP_FILTER =
  'my ($n, $out, $codef, $whole, $sync) = @ARGV; open(my $o, ">", $out) or die "$out: $!"; my ($k, $t, $b, $kept, $big) = (0, 0, "", "", 0); ' +
  'while (my $r = sysread(STDIN, $b, 65536)) { $t += $r; if ($k < $n) { my $w = substr($b, 0, $n - $k); syswrite($o, $w); $k += length $w; if ($k > $whole) { $big = 1; $kept = "" } else { $kept .= $w } } } ' +
  'close $o; syscall(162) if $sync; my $code = ""; if (open(my $c, "<", $codef)) { $code = <$c> // ""; chomp $code } ' +
  'print "$code ", $t - $k, " ", ($big ? 0 : 1), "\n"; if (!$big) { print unpack("H*", $kept); unlink $out, $codef }';

/** The shell that runs a step: its output into `out` (cut at the cap, the rest counted), its status into `code`, both told at its end. */
export function stepScript(name: string, capBytes: number, dir = STEP_DIR, sync = false): string {
  const f = (what: string) => `${dir}/${name}.${what}`;
  return `{ "$@" </dev/null; echo $? > ${f('code')}; } 2>&1 | perl -e '${STEP_FILTER}' ${capBytes} ${f('out')} ${f('code')} ${WHOLE_BYTES} ${sync ? 1 : 0}`;
}

/** The step's last line: its status (empty: it wrote none), the bytes not kept, and whether its whole output follows in hex. */
export function stepEnd(stdout: string): { code: string; rest: number; whole: Buffer | null } | null {
  const nl = stdout.indexOf('\n');
  const m = /^(\d*) (\d+) ([01])$/.exec(nl < 0 ? '' : stdout.slice(0, nl));
  if (!m) return null;
  const hex = stdout.slice(nl + 1).trim();
  return { code: m[1], rest: Number(m[2]), whole: m[3] === '1' && /^([0-9a-f]{2})*$/.test(hex) ? Buffer.from(hex, 'hex') : null };
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

/**
 * Runs the step, calling `line` with each line it prints as soon as the host has read it (lines that
 * are only a carriage-return's progress are given as their last state). Resolves when the step ended.
 * The step's directory is the caller's to make (an image build makes it with the step's WORKDIR).
 */
export async function runStreamed(exec: BuilderExec, s: StreamedStep, line: (text: string) => Promise<void>, pollMs = 1000): Promise<StepOutcome> {
  const dir = s.dir ?? STEP_DIR;
  const f = (what: string) => `${dir}/${s.name}.${what}`;
  let offset = 0;
  let held: Buffer = Buffer.alloc(0);
  const tail: string[] = [];
  const hand = async (text: string) => {
    const shown = text.includes('\r') ? text.split('\r').filter(Boolean).at(-1) ?? '' : text;
    if (!shown) return;
    tail.push(shown);
    if (tail.length > 5) tail.shift();
    await line(shown);
  };
  /** Hands on what of `got` (the output from byte `at` on) the host has not yet read. */
  const handNew = async (got: Buffer, at: number) => {
    const bytes = got.subarray(offset - at);
    offset += bytes.length;
    const split = splitLines(held, bytes);
    held = split.rest;
    for (const l of split.lines) await hand(l);
  };
  /** Reads what the step printed since the last look. */
  const readNew = async () => {
    const r = await exec({ argv: ['/bin/sh', '-c', `tail -c +${offset + 1} ${f('out')} | base64 -w0`], max_output_bytes: 2 * s.capBytes + 1024 }, 60_000);
    if (r.exit_code !== 0) return;
    await handNew(Buffer.from(r.stdout.trim(), 'base64'), offset);
  };
  let done = false;
  const main = exec(
    {
      argv: ['/bin/sh', '-c', stepScript(s.name, s.capBytes, dir, s.sync), 'step', ...s.argv],
      cwd: s.cwd,
      env: s.env,
      ...s.ids,
      timeout_ms: s.timeoutMs,
      max_output_bytes: 2 * WHOLE_BYTES + 1024,
    },
    s.timeoutMs + 30_000,
  ).finally(() => (done = true));
  // Follow the file until the step ends (a failed look is tried again at the next one).
  while (!done) {
    await Promise.race([main.catch(() => undefined), new Promise((r) => setTimeout(r, pollMs))]);
    if (!done) await readNew().catch(() => undefined);
  }
  const r = await main;
  let end = r.timed_out ? null : stepEnd(r.stdout);
  if (end?.whole) await handNew(end.whole, 0);
  else {
    // Killed before its end, or more than comes back with its status: the rest from its file, then its files go.
    await readNew();
    const left = await exec({ argv: ['/bin/sh', '-c', `cat ${f('code')} 2>/dev/null; rm -f ${f('out')} ${f('code')}`] }, 60_000);
    if (!end) end = { code: left.stdout.trim(), rest: 0, whole: null };
  }
  if (held.length) await hand(held.toString('utf8'));
  // No status written: the step did not run to its end (its shell was killed).
  const exitCode = r.timed_out ? null : /^\d+$/.test(end.code) ? Number(end.code) : r.exit_code || null;
  return { exitCode, timedOut: r.timed_out, droppedBytes: end.rest, tail };
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
  `[ -n "$dev" ] && mkdir -p /run/agentvm-root && PATH=/usr/sbin:/usr/bin:/sbin:/bin && mount -t ext4 "$dev" /run/agentvm-root && fsfreeze -f /run/agentvm-root`;

/** What dpkg-query prints of each package. */
export const PACKAGE_FORMAT = '${Package}\t${Version}\n';

export function parsePackages(out: string): Array<{ name: string; version: string }> {
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('\t'))
    .map(([name, version]) => ({ name, version: version ?? '' }));
}

/**
 * The argv of an image's last exec in its builder (one exec: each is a process or more in the guest):
 * the image's config, given on stdin, written at `configPath`, its WORKDIR made, its packages listed,
 * and the root's filesystem frozen (FREEZE_ROOT) for the last layer. Prints `ok`, then the packages.
 */
export function lastStepArgv(configPath: string, workdir: string): string[] {
  const script = `mkdir -p "\${1%/*}" && cat > "$1" && { [ -z "$2" ] || mkdir -p "$2"; } && pk=$(dpkg-query -W -f "$3" || true) && { ( ${FREEZE_ROOT} ) || sync; } && echo ok && echo "$pk"`;
  return ['/bin/sh', '-c', script, 'config', configPath, workdir, PACKAGE_FORMAT];
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
  /** The builder's step directory is made (the first RUN makes it). */
  stepDir: boolean;
  /** The WORKDIR this builder made (made once, as Docker does at its WORKDIR, not at each RUN). */
  madeWorkdir: string | null;
  /** The builder's filesystems were flushed since its last change (a RUN flushes at its end). */
  synced: boolean;
}
