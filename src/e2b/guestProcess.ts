/**
 * A process in a guest for E2B's process service, on a stream of the VM's data port. A guest of
 * protocol 7 on starts the program itself (guest/process.ts) and the stream carries its frames from
 * the start. An older guest gets a terminal with a login shell: the host types one line that turns the
 * terminal raw and starts a small Perl program (perl-base is in every Debian root), sends it the
 * program, and from then on the terminal carries the same frames both ways. Either forks the command
 * with pipes for stdin, stdout and stderr (so they stay apart, byte for byte) in a process group of
 * its own, and frames what the pipes give: `P` the pid, `O` stdout, `E` stderr, `X` the wait status.
 * The host frames `D` stdin bytes, `C` the end of stdin and `K` a signal for the group. A frame is its
 * letter, 8 hex digits of length, and the bytes (a `K` frame has the signal's number in place of a
 * length, and no bytes).
 *
 * A PTY process (E2B's `pty.create`) is the terminal itself: the line starts the command in it, and
 * the bytes pass as they are.
 */
import { EventEmitter } from 'node:events';
import type { GuestShell } from '../domain/guestAccess.ts';
import type { ProcessOpen } from '../wire/protocol.ts';
import { processFrame, ProcessFrameReader, waitStatus } from '../wire/processFrames.ts';
import { shellQuote } from '../wire/shellWords.ts';
import type { SandboxContext } from './context.ts';

/** Marks where the program's frames (or a PTY's own bytes) start; the echo of the typed line never holds it. */
const START = Buffer.from('\x1eAVMSTART');
const START_END = 0x1e;

export interface ProcessSpec {
  argv: string[];
  env: Record<string, string>;
  cwd: string | null;
  /** As root (the guest starts it so; an older guest through passwordless sudo). */
  root: boolean;
  stdin: boolean;
  pty: { cols: number; rows: number } | null;
  /** Kept by the guest with the process (ProcessOpen.meta): what a host after a pause or a restart knows of it. */
  meta?: string;
}

export type ProcessExit = { exitCode: number; signal: string | null; error: string | null };

/** What the guest's agent is asked to start itself, where it can (a plain process, never a PTY's). */
function processOpen(spec: ProcessSpec): ProcessOpen | undefined {
  if (spec.pty) return undefined;
  return { argv: spec.argv, env: spec.env, cwd: spec.cwd, root: spec.root, stdin: spec.stdin, ...(spec.meta !== undefined ? { meta: spec.meta } : {}) };
}

const hex = (s: string) => Buffer.from(s, 'utf8').toString('hex');
const perlString = (s: string) => `pack('H*','${hex(s)}')`;

/** POSIX shell single quotes. */

/** The Perl program for a spec: no JSON in perl-base, so the spec is written into it as hex literals. */
function program(spec: ProcessSpec): string {
  const argv = spec.root ? ['sudo', '-n', '--', 'env', ...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`), ...spec.argv] : spec.argv;
  const env = spec.root ? {} : spec.env;
  return String.raw`
use strict; use POSIX ();
binmode STDIN; binmode STDOUT; $| = 1;
my @argv = (${argv.map(perlString).join(',')});
my %env = (${Object.entries(env).map(([k, v]) => `${perlString(k)} => ${perlString(v)}`).join(',')});
my $cwd = ${spec.cwd === null ? 'undef' : perlString(spec.cwd)};
my $keepin = ${spec.stdin ? 1 : 0};
sub put { my ($t, $d) = @_; my $b = $t . sprintf('%08x', length $d) . $d; while (length $b) { my $n = syswrite(STDOUT, $b); if (!defined $n) { next if $!{EINTR} || $!{EAGAIN}; exit 1 } substr($b, 0, $n) = '' } }
pipe(my $ir, my $iw) or die; pipe(my $or, my $ow) or die; pipe(my $er, my $ew) or die;
my $pid = fork(); die "fork: $!" unless defined $pid;
if (!$pid) {
  setpgrp(0, 0);
  open(STDIN, '<&', $ir); open(STDOUT, '>&', $ow); open(STDERR, '>&', $ew);
  close $_ for ($iw, $or, $er, $ir, $ow, $ew);
  if (defined $cwd && !chdir $cwd) { print STDERR "cwd $cwd: $!\n"; POSIX::_exit(1) }
  $cwd = '/home/user' if !defined $cwd && chdir '/home/user';
  $ENV{PWD} = $cwd if defined $cwd;
  $ENV{$_} = $env{$_} for keys %env;
  exec { $argv[0] } @argv; print STDERR "$argv[0]: $!\n"; POSIX::_exit(127);
}
close $_ for ($ir, $ow, $ew);
$SIG{PIPE} = 'IGNORE';
put('P', $pid);
if (!$keepin) { close $iw; $iw = undef }
my %out = (fileno($or) => ['O', $or], fileno($er) => ['E', $er]);
my $in = ''; my $hostgone = 0;
while (%out) {
  my $r = ''; vec($r, $_, 1) = 1 for keys %out; vec($r, 0, 1) = 1 unless $hostgone;
  my $n = select($r, undef, undef, undef); next if $n < 0 && $!{EINTR}; last if $n < 0;
  for my $fd (keys %out) {
    next unless vec($r, $fd, 1);
    my $got = sysread($out{$fd}[1], my $buf, 65536);
    if ($got) { put($out{$fd}[0], $buf) } elsif (defined $got || !$!{EINTR}) { close $out{$fd}[1]; delete $out{$fd} }
  }
  if (!$hostgone && vec($r, 0, 1)) {
    my $got = sysread(STDIN, my $buf, 65536);
    if (!$got) { $hostgone = 1; next }
    $in .= $buf;
    while (length $in >= 9) {
      my $t = substr($in, 0, 1); my $len = hex substr($in, 1, 8);
      if ($t eq 'K') { substr($in, 0, 9) = ''; kill $len, -$pid; next }
      last if length $in < 9 + $len;
      my $d = substr($in, 9, $len); substr($in, 0, 9 + $len) = '';
      if ($t eq 'D' && $iw) { my $o = 0; while ($o < length $d) { my $w = syswrite($iw, $d, length($d) - $o, $o); last unless defined $w; $o += $w } }
      elsif ($t eq 'C' && $iw) { close $iw; $iw = undef }
    }
  }
}
waitpid($pid, 0); put('X', sprintf('%d', $?)); exit 0;
`;
}

/** The line typed into the login shell: the terminal raw and silent, the marker, then Perl reading its program. */
const BOOT_LINE =
  "stty raw -echo; printf '\\036AVMSTART%s\\036' $$; exec perl -e 'binmode STDIN; my $n = \"\"; sysread(STDIN, $n, 8 - length $n, length $n) while length $n < 8; " +
  'my $s = ""; sysread(STDIN, $s, hex($n) - length $s, length $s) while length $s < hex $n; eval $s; die $@ if $@\'\n';

const SIGNALS: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 9: 'SIGKILL', 13: 'SIGPIPE', 15: 'SIGTERM' };

/**
 * A process started in a guest. Events: `start` (pid), `stdout`, `stderr`, `pty` (Buffer), `end`
 * (ProcessExit). Output before anyone listens is kept by the registry (processes.ts), not here.
 */
export class GuestProcess extends EventEmitter {
  pid = 0;
  ended: ProcessExit | null = null;
  /** Output from the start until the first follower takes it (frames come in bursts: a short command's all at once). */
  private backlog: { kind: 'stdout' | 'stderr' | 'pty'; data: Buffer }[] | null = [];
  /** What came before the start's marker (an older guest's terminal), then the frames' reader. */
  private buf: Buffer = Buffer.alloc(0);
  private readonly frames = new ProcessFrameReader();
  private started = false;
  private readonly ready: Promise<void>;

  /** Its stream went with its VM's host (a pause, a restart), not with its end: it may run on in the guest. */
  lost = false;

  /** The process's stream in the sandbox (not started yet: call start). */
  static async open(sb: SandboxContext, spec: ProcessSpec): Promise<GuestProcess> {
    return new GuestProcess(await sb.openShell(spec.pty ?? { cols: 80, rows: 24 }, processOpen(spec)), spec);
  }

  /** A process the guest started earlier, followed again from now on (started: its pid comes first); null when it no longer runs. */
  static async attach(sb: SandboxContext, pid: number, spec: ProcessSpec): Promise<GuestProcess | null> {
    const shell = await sb.attachProcess(pid);
    if (!shell) return null;
    const proc = new GuestProcess(shell, spec);
    await proc.ready;
    return proc;
  }

  constructor(
    private readonly shell: GuestShell,
    readonly spec: ProcessSpec,
  ) {
    super();
    // The guest started the program itself (protocol 7 on): its frames come first, nothing is typed.
    this.started = shell.framed === true;
    let resolveReady!: () => void;
    let rejectReady!: (e: Error) => void;
    this.ready = new Promise((res, rej) => ((resolveReady = res), (rejectReady = rej)));
    this.ready.catch(() => undefined);
    shell.output((chunk, done) => {
      this.take(chunk, resolveReady);
      done();
    });
    void shell.ended.then((end) => {
      if (!this.started) rejectReady(new Error(end.kind === 'cut' ? end.message : 'the shell ended before the process started'));
      if (this.ended) return;
      if (end.kind === 'cut' && shell.framed) this.lost = true;
      if (this.spec.pty && end.kind === 'exit') this.finish({ exitCode: end.exit_code ?? -1, signal: end.signal, error: null });
      else this.finish({ exitCode: -1, signal: end.kind === 'exit' ? end.signal : null, error: end.kind === 'cut' ? end.message : 'the process was cut off' });
    });
  }

  /** Types the boot line (and, for a plain process, its program); resolves once the guest has the pid. */
  async start(): Promise<void> {
    const s = this.spec;
    if (this.shell.framed) return this.ready;
    if (s.pty) {
      const env = Object.entries(s.env).map(([k, v]) => shellQuote(`${k}=${v}`)).join(' ');
      const cd = s.cwd ? `cd ${shellQuote(s.cwd)} && ` : 'cd /home/user 2>/dev/null; ';
      const cmd = [...(s.root ? ['sudo', '-n', '--'] : []), 'env', ...(env ? [env] : []), ...s.argv.map(shellQuote)].join(' ');
      await this.shell.write(Buffer.from(`stty -echo; printf '\\036AVMSTART%s\\036' $$; stty echo; ${cd}exec ${cmd}\n`));
    } else {
      await this.shell.write(Buffer.from(BOOT_LINE));
    }
    const code = program(s);
    if (!s.pty) {
      // The program is sent once the terminal is raw (the marker says so): typed earlier, the line
      // discipline would still treat its bytes as a line.
      await this.waitStarted();
      await this.shell.write(Buffer.concat([Buffer.from(Buffer.byteLength(code).toString(16).padStart(8, '0')), Buffer.from(code)]));
    }
    await this.ready;
  }

  private startedWait: Promise<void> | null = null;
  private onStarted: (() => void) | null = null;
  private waitStarted(): Promise<void> {
    if (this.started) return Promise.resolve();
    return (this.startedWait ??= new Promise((r) => (this.onStarted = r)));
  }

  /** What the process printed before anyone followed it; once (later calls answer nothing). */
  takeBacklog(): { kind: 'stdout' | 'stderr' | 'pty'; data: Buffer }[] {
    const b = this.backlog ?? [];
    this.backlog = null;
    return b;
  }

  private out(kind: 'stdout' | 'stderr' | 'pty', data: Buffer): void {
    if (this.backlog && this.listenerCount(kind) === 0) this.backlog.push({ kind, data });
    this.emit(kind, data);
  }

  private take(chunk: Buffer, ready: () => void): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    if (!this.started) {
      const at = this.buf.indexOf(START);
      if (at < 0) {
        // Keep only a tail that could be the start of the marker.
        if (this.buf.length > 64 * 1024) this.buf = this.buf.subarray(this.buf.length - START.length - 16);
        return;
      }
      const close = this.buf.indexOf(START_END, at + START.length);
      if (close < 0) return;
      const shellPid = Number(this.buf.subarray(at + START.length, close).toString());
      this.buf = this.buf.subarray(close + 1);
      this.started = true;
      this.onStarted?.();
      if (this.spec.pty) {
        this.pid = shellPid;
        this.emit('start', this.pid);
        ready();
      }
    }
    if (this.spec.pty) {
      if (this.buf.length) this.out('pty', this.buf);
      this.buf = Buffer.alloc(0);
      return;
    }
    const frames = this.frames.push(this.buf);
    this.buf = Buffer.alloc(0);
    for (const { type, data } of frames) {
      if (type === 'P') {
        this.pid = Number(data.toString());
        this.emit('start', this.pid);
        ready();
      } else if (type === 'O') this.out('stdout', data);
      else if (type === 'E') this.out('stderr', data);
      else if (type === 'X') {
        const { exitCode, signal } = waitStatus(Number(data.toString()));
        this.finish(signal ? { exitCode: -1, signal: SIGNALS[signal] ?? `SIG${signal}`, error: null } : { exitCode: exitCode!, signal: null, error: null });
        this.shell.close();
      }
    }
  }

  private finish(exit: ProcessExit): void {
    if (this.ended) return;
    this.ended = exit;
    this.emit('end', exit);
  }

  private frame(type: string, data: Buffer | number): Promise<void> {
    return this.shell.write(processFrame(type, data));
  }

  async sendStdin(data: Buffer): Promise<void> {
    if (this.spec.pty) return this.shell.write(data);
    for (let o = 0; o < data.length; o += 32 * 1024) await this.frame('D', data.subarray(o, o + 32 * 1024));
  }

  async closeStdin(): Promise<void> {
    if (!this.spec.pty) await this.frame('C', 0);
  }

  /** SIGTERM or SIGKILL to the process's group; a PTY's session is hung up. */
  async signal(sig: 9 | 15): Promise<void> {
    if (this.spec.pty || this.ended) return this.shell.close();
    await this.frame('K', sig);
  }

  resize(cols: number, rows: number): void {
    this.shell.resize(cols, rows);
  }

  close(): void {
    this.shell.close();
  }
}
