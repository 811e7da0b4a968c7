/**
 * The RUN steps of an image build, in one shell of the builder for the whole build: the builder's agent
 * starts `/bin/sh -s` (as root) on a stream of the VM's data port (wire/processFrames.ts), and each step
 * is a command written to its stdin. A step runs in a subshell of it (a fork, not a new program: under
 * emulation a shell's start is 50–60 ms of each step, and a stream's opening 10–15 more), with its own
 * WORKDIR (made where missing), environment and stdin (/dev/null): nothing it sets, exports or changes
 * reaches the next. A shell form is `eval`ed there, as `sh -c` runs it (no arguments, no options set);
 * an exec form, or a step of another USER (dropped to with `setpriv`), is `exec`ed from it.
 *
 * After the step the shell flushes the machine's filesystems when asked (an image build takes the
 * step's layer next) and writes a line of its own, naming the step's status, to stdout and to stderr;
 * each line the step printed before it (stdout and stderr, as a terminal shows them) reaches the build's
 * log as it comes, at most `capBytes` of it, the rest counted. The line opens with a control character
 * and a nonce of this shell: what a step prints cannot end a step.
 */
import { randomBytes } from 'node:crypto';
import type { GuestShell } from '../domain/guestAccess.ts';
import type { ProcessOpen } from '../wire/protocol.ts';
import { processFrame, ProcessFrameReader } from '../wire/processFrames.ts';
import { shellQuote } from '../wire/shellWords.ts';
import { BUSYBOX } from './buildStep.ts';

/** The build's shell, as root in `/`, its stdin the steps (the environment is the first step's, or none for one a builder keeps ready). */
export const BUILD_SHELL: Omit<ProcessOpen, 'env'> = { argv: ['/bin/sh', '-s'], cwd: '/', root: true, stdin: true };

/** Starts a program in the builder on a stream of its data port. */
export type BuilderProcess = (p: ProcessOpen) => Promise<GuestShell>;

export interface StreamedStep {
  /** The step's command, run as `ids` in `cwd` (made when missing) with `env` (and nothing else of the build's). */
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  ids: { uid: number; gid: number };
  timeoutMs: number;
  capBytes: number;
  /** Flush the machine's filesystems at its end (an image build takes the step's layer next). */
  sync?: boolean;
  /** A file made before it runs, when missing (buildStep.ts BUILD_MARK). */
  mark?: string;
  /** A shell form's arguments (`$1`…; a RUN has none). */
  args?: string[];
}

export interface StepOutcome {
  exitCode: number | null;
  timedOut: boolean;
  /** Bytes printed beyond the cap (not kept). */
  droppedBytes: number;
  /** The last lines it printed (past the cap too). */
  tail: string[];
  /** Why the step's shell ended before the step did (its builder went, its stream was cut, the step ended it); null when it ended. */
  cut: string | null;
}

/** An environment variable's name sh can export (any other is left out, as `env` would refuse it). */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The text the shell runs for a step; its last line says `<end>:<status>` on stdout and on stderr. */
export function stepCommand(s: StreamedStep, end: string): string {
  const { uid, gid } = s.ids;
  const cwd = shellQuote(s.cwd || '/');
  const exports = Object.entries(s.env).filter(([k]) => NAME.test(k)).map(([k, v]) => `export ${k}=${shellQuote(v)}; `).join('');
  const drop = uid === 0 && gid === 0 ? '' : `setpriv --reuid=${uid} --regid=${gid} --init-groups -- `;
  const shellForm = s.argv.length === 3 && s.argv[0] === '/bin/sh' && s.argv[1] === '-c';
  const args = s.args?.length ? `set -- ${s.args.map(shellQuote).join(' ')}; ` : '';
  const body = shellForm && !drop ? `${args}eval ${shellQuote(s.argv[2])}` : `exec ${drop}${s.argv.map(shellQuote).join(' ')}`;
  const mark = s.mark ? `[ -e ${shellQuote(s.mark)} ] || : > ${shellQuote(s.mark)}; ` : '';
  const sync = s.sync ? `{ { [ -x ${BUSYBOX} ] && ${BUSYBOX} sync; } || sync; } </dev/null; ` : '';
  return (
    `${mark}( { [ -d ${cwd} ] || mkdir -p -- ${cwd}; } && cd -- ${cwd} || exit 1; ${exports}${body}\n) </dev/null; ` +
    `__avm_status=$?; ${sync}printf '${end}:%d\\n' "$__avm_status"; printf '${end}:%d\\n' "$__avm_status" >&2; unset __avm_status\n`
  );
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

/** How many bytes at the end of `buf` could be the start of `marker` (held back until the next bytes say). */
function markerPrefixAtEnd(buf: Buffer, marker: Buffer): number {
  for (let n = Math.min(buf.length, marker.length - 1); n > 0; n--) {
    if (buf.subarray(buf.length - n).equals(marker.subarray(0, n))) return n;
  }
  return 0;
}

/** One step's output on one stream: its lines to the log within the cap, the end line looked for. */
interface StreamState {
  /** Bytes not yet known to be the step's (a possible start of the end line, or the end line not whole). */
  pending: Buffer;
  kept: Buffer;
  all: Buffer;
  status: number | null;
}

interface Running {
  s: StreamedStep;
  line: (text: string, stream: 'O' | 'E') => Promise<void>;
  streams: { O: StreamState; E: StreamState };
  kept: number;
  dropped: number;
  tail: string[];
  finish: () => void;
}

export class BuildShell {
  private readonly end = `\x1eagentvm-step-end-${randomBytes(8).toString('hex')}`;
  private readonly marker = Buffer.from(this.end);
  private readonly frames = new ProcessFrameReader();
  private work = Promise.resolve();
  private step: Running | null = null;
  /** Why the shell is gone (null while it runs). */
  private gone: string | null = null;
  private readonly goneSignal: Promise<void>;

  private constructor(private readonly shell: GuestShell) {
    shell.output((chunk, done) => {
      this.work = this.work.then(() => this.take(chunk)).finally(done);
    });
    this.goneSignal = shell.ended.then((end) => {
      this.gone = end.kind === 'cut' ? end.message : 'the build shell ended';
    });
  }

  /** The shell, started with `env` (a first step's): each step exports its own over it. */
  static async open(open: BuilderProcess, env: Record<string, string>): Promise<BuildShell> {
    const shell = await open({ ...BUILD_SHELL, env });
    if (!shell.framed) {
      shell.close();
      throw new Error("the builder's agent cannot start a program on a stream (an agent older than the image's)");
    }
    return new BuildShell(shell);
  }

  /**
   * `shell` while it runs, else (none yet, or it ended) a new one: the one a builder kept ready has
   * waiting (`kept`, BUILD_SHELL started by its warm-up, followed on a new stream), where it has one.
   */
  static async alive(shell: BuildShell | null, open: BuilderProcess, env: Record<string, string>, kept?: () => Promise<GuestShell | null>): Promise<BuildShell> {
    if (shell?.running) return shell;
    shell?.close();
    const waiting = shell ? null : await kept?.().catch(() => null);
    return waiting?.framed ? new BuildShell(waiting) : BuildShell.open(open, env);
  }

  /** The shell still runs: a step may be given to it. */
  get running(): boolean {
    return this.gone === null;
  }

  /**
   * Runs the step, calling `line` with each line it prints (within the cap) as soon as it comes; the
   * guest is held back while `line` works (the stream's window). Resolves when the step ended.
   */
  async run(s: StreamedStep, line: (text: string, stream: 'O' | 'E') => Promise<void>): Promise<StepOutcome> {
    if (this.step) throw new Error('a step is already running in this build shell');
    if (this.gone !== null) return { exitCode: null, timedOut: false, droppedBytes: 0, tail: [], cut: this.gone };
    const fresh = (): StreamState => ({ pending: Buffer.alloc(0), kept: Buffer.alloc(0), all: Buffer.alloc(0), status: null });
    let finish!: () => void;
    const finished = new Promise<void>((r) => (finish = r));
    const step: Running = { s, line, streams: { O: fresh(), E: fresh() }, kept: 0, dropped: 0, tail: [], finish };
    this.step = step;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // The step's group is the shell's: the build fails with it.
      this.shell.write(processFrame('K', 9)).catch(() => undefined);
    }, s.timeoutMs);
    try {
      await this.shell.write(processFrame('D', Buffer.from(stepCommand(s, this.end))));
      await Promise.race([finished, this.goneSignal]);
      // What came before the shell's end is the step's too.
      await this.work;
    } finally {
      clearTimeout(timer);
      this.step = null;
    }
    const { O, E } = step.streams;
    // What was left without a newline at the end is a line too.
    for (const [stream, h] of [['O', O], ['E', E]] as const) {
      remember(step, h.all.toString('utf8'));
      const seen = shown(h.kept.toString('utf8'));
      if (seen) await line(seen, stream);
    }
    const ended = O.status !== null && E.status !== null;
    return {
      exitCode: ended ? O.status : null,
      timedOut,
      droppedBytes: step.dropped,
      tail: step.tail,
      cut: ended || timedOut ? null : (this.gone ?? 'the build shell ended'),
    };
  }

  /** Hangs up: the shell and whatever a step left running end. */
  close(): void {
    this.shell.close();
  }

  private async take(chunk: Buffer): Promise<void> {
    for (const f of this.frames.push(chunk)) {
      const step = this.step;
      if (!step || (f.type !== 'O' && f.type !== 'E')) continue; // a step's leftovers between steps, the pid, the shell's status
      const h = step.streams[f.type];
      let buf = h.pending.length ? Buffer.concat([h.pending, f.data]) : f.data;
      const at = buf.indexOf(this.marker);
      if (at !== -1) {
        const nl = buf.indexOf(10, at);
        if (nl === -1) {
          h.pending = buf;
          continue;
        }
        await passOn(step, f.type, buf.subarray(0, at));
        h.status = Number(buf.subarray(at + this.marker.length + 1, nl).toString());
        h.pending = Buffer.alloc(0);
        if (step.streams.O.status !== null && step.streams.E.status !== null) step.finish();
        continue;
      }
      const hold = markerPrefixAtEnd(buf, this.marker);
      h.pending = Buffer.from(buf.subarray(buf.length - hold));
      buf = buf.subarray(0, buf.length - hold);
      await passOn(step, f.type, buf);
    }
  }
}

function remember(step: Running, text: string): void {
  const seen = shown(text);
  if (!seen) return;
  step.tail.push(seen.slice(0, 1000));
  if (step.tail.length > 5) step.tail.shift();
}

/** The step's own bytes of one stream: its lines to the log within the cap, all of them to the tail. */
async function passOn(step: Running, stream: 'O' | 'E', data: Buffer): Promise<void> {
  const h = step.streams[stream];
  if (!data.length || h.status !== null) return;
  const all = splitLines(h.all, data);
  all.lines.forEach((t) => remember(step, t));
  h.all = all.rest.length > 4096 ? all.rest.subarray(all.rest.length - 4096) : all.rest;
  const keep = data.subarray(0, Math.max(0, step.s.capBytes - step.kept));
  step.kept += keep.length;
  step.dropped += data.length - keep.length;
  if (!keep.length) return;
  const split = splitLines(h.kept, keep);
  h.kept = split.rest;
  for (const seen of split.lines.map(shown)) if (seen) await step.line(seen, stream);
}
