/**
 * A RUN step of an image build with its output streamed: the step writes what it prints (stdout and
 * stderr together, as a terminal shows them) to a file in the builder's /run (a tmpfs, so nothing of
 * it lands in the step's layer), at most `capBytes` of it, the rest counted; while it runs the host
 * reads what is new each `pollMs` and hands on each whole line as it comes. So a build's log is live,
 * line by line, not a step's output at its end.
 */
import type { ExecArgs, ExecResult } from '../wire/protocol.ts';

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

/**
 * Passes on the first N bytes of its input as they come, reads the rest to the end (so the step is
 * never stopped by a closed pipe) and writes how many bytes it did not pass on into FILE.
 */
const CAP_FILTER = 'my ($n, $f) = @ARGV; my ($k, $t, $b) = (0, 0); while (my $r = sysread(STDIN, $b, 65536)) { $t += $r; if ($k < $n) { my $w = substr($b, 0, $n - $k); syswrite(STDOUT, $w); $k += length $w; } } open(my $o, ">", $f) or die; print $o $t - $k;';

/** The shell that runs a step: its output into `out` (cut at the cap, the rest counted into `rest`), its status into `code`. */
export function stepScript(name: string, capBytes: number, dir = STEP_DIR): string {
  const f = (what: string) => `${dir}/${name}.${what}`;
  return `{ "$@" </dev/null; echo $? > ${f('code')}; } 2>&1 | perl -e '${CAP_FILTER}' ${capBytes} ${f('rest')} > ${f('out')}`;
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
 */
export async function runStreamed(exec: BuilderExec, s: StreamedStep, line: (text: string) => Promise<void>, pollMs = 1000): Promise<StepOutcome> {
  const dir = s.dir ?? STEP_DIR;
  const f = (what: string) => `${dir}/${s.name}.${what}`;
  const prep = await exec({ argv: ['/bin/sh', '-c', `mkdir -p ${dir} && chmod 1777 ${dir} && : > ${f('out')} && chmod 666 ${f('out')}`] }, 60_000);
  if (prep.exit_code !== 0) throw new Error(`preparing the step's output failed: ${prep.stderr.trim().slice(0, 200)}`);
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
  /** Reads what the step printed since the last look. */
  const readNew = async () => {
    const r = await exec({ argv: ['/bin/sh', '-c', `tail -c +${offset + 1} ${f('out')} | base64 -w0`], max_output_bytes: 2 * s.capBytes + 1024 }, 60_000);
    if (r.exit_code !== 0) return;
    const bytes = Buffer.from(r.stdout.trim(), 'base64');
    offset += bytes.length;
    const split = splitLines(held, bytes);
    held = split.rest;
    for (const l of split.lines) await hand(l);
  };
  let done = false;
  const main = exec(
    { argv: ['/bin/sh', '-c', stepScript(s.name, s.capBytes, dir), 'step', ...s.argv], cwd: s.cwd, env: s.env, ...s.ids, timeout_ms: s.timeoutMs, max_output_bytes: 64 * 1024 },
    s.timeoutMs + 30_000,
  ).finally(() => (done = true));
  // Follow the file until the step ends (a failed look is tried again at the next one).
  while (!done) {
    await Promise.race([main.catch(() => undefined), new Promise((r) => setTimeout(r, pollMs))]);
    if (!done) await readNew().catch(() => undefined);
  }
  const r = await main;
  await readNew();
  if (held.length) await hand(held.toString('utf8'));
  const ends = await exec({ argv: ['/bin/sh', '-c', `echo "$(cat ${f('code')} 2>/dev/null) $(cat ${f('rest')} 2>/dev/null)"; rm -f ${f('out')} ${f('code')} ${f('rest')}`] }, 60_000);
  const [code, rest] = ends.stdout.trim().split(' ');
  // No status written: the step did not run to its end (its shell was killed).
  const exitCode = r.timed_out ? null : /^\d+$/.test(code) ? Number(code) : r.exit_code || null;
  return { exitCode, timedOut: r.timed_out, droppedBytes: /^\d+$/.test(rest) ? Number(rest) : 0, tail };
}
