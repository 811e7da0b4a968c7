/**
 * File operations of E2B's filesystem service in a guest: each is one small Perl program run as a
 * process of the sandbox (guestProcess.ts), as the sandbox's user, so it may touch what that user may
 * (anywhere in the guest, as E2B's envd does), and answers entries as lines of tab-separated fields.
 * A file's metadata (E2B's, from envd 0.6.2) is its extended attributes `user.e2b.<key>`, read and
 * written with the system calls themselves (perl-base has syscall(), no xattr module).
 */
import { GuestProcess, type ProcessSpec } from './guestProcess.ts';
import type { SandboxContext } from './context.ts';
import { E2B_HOME } from '../wire/protocol.ts';
import { MAX_FILE_BYTES } from '../domain/guestAccess.ts';
import { E2bError } from './errors.ts';

/** An E2B path made absolute (relative to the user's home directory, as E2B's are: root's /root; `~` is that directory). */
export function absolutePath(p: string, user = 'user'): string {
  const home = user === 'root' ? '/root' : E2B_HOME;
  let out = p;
  if (out === '~' || out.startsWith('~/')) out = home + out.slice(1);
  else if (!out.startsWith('/')) out = `${home}/${out}`;
  const parts: string[] = [];
  for (const seg of out.split('/')) {
    if (!seg || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return '/' + parts.join('/');
}

export interface Collected {
  stdout: Buffer;
  stderr: string;
  exitCode: number;
}

/** A file's cap and an envelope around it: what a process run to its end may print (stdout and stderr together), what a multipart upload may carry. */
export const FILE_ENVELOPE_BYTES = MAX_FILE_BYTES + 1024 * 1024;

/**
 * Runs argv to its end in the sandbox, with `input` as its stdin; what it printed, and its exit. Held
 * in memory, so held to `maxBytes` (413 past it: an endless file, `/dev/zero`, is killed, not read);
 * `signal` (the client went) kills it too.
 */
export async function collect(sb: SandboxContext, argv: string[], input?: Buffer, o: { maxBytes?: number; signal?: AbortSignal } = {}): Promise<Collected> {
  const spec: ProcessSpec = { argv, env: {}, cwd: null, root: sb.user === 'root', stdin: input !== undefined, pty: null };
  const proc = await GuestProcess.open(sb, spec);
  const max = o.maxBytes ?? FILE_ENVELOPE_BYTES;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let size = 0;
  let over = false;
  const stop = () => void proc.signal(9).catch(() => undefined).finally(() => proc.close());
  const take = (into: Buffer[]) => (b: Buffer) => {
    if (over) return;
    size += b.length;
    if (size > max) {
      over = true;
      return stop();
    }
    into.push(b);
  };
  proc.on('stdout', take(out));
  proc.on('stderr', take(err));
  const ended = new Promise<number>((resolve) => proc.once('end', (x: { exitCode: number }) => resolve(x.exitCode)));
  o.signal?.addEventListener('abort', stop, { once: true });
  try {
    await proc.start();
    if (input !== undefined) {
      await proc.sendStdin(input);
      await proc.closeStdin();
    }
    const exitCode = await ended;
    if (over) throw new E2bError(413, `the output is larger than ${max} bytes`);
    if (o.signal?.aborted) throw new E2bError(499, 'the client went');
    return { stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString(), exitCode };
  } finally {
    o.signal?.removeEventListener('abort', stop);
    proc.close();
  }
}

export type EntryType = 'file' | 'dir' | 'symlink';

export interface Entry {
  name: string;
  path: string;
  type: EntryType;
  size: number;
  mode: number;
  owner: string;
  group: string;
  mtimeS: number;
  symlinkTarget: string | null;
  /** Its `user.e2b.*` extended attributes, the prefix taken away (none: null). */
  metadata: Record<string, string> | null;
}

/**
 * Perl: `meta(path, follow)` a file's `user.e2b.*` attributes as hex of `key NUL value NUL …`;
 * `setmeta(path, key, value, …)` removes those it has and sets these (following a link, as a write
 * does). Uses `fault`. The numbers are the system calls' on x86-64 and arm64.
 */
export const XATTR_PERL = String.raw`
my %XN = (x86_64 => [191, 192, 194, 195, 188, 197], aarch64 => [8, 9, 11, 12, 5, 14]);
my $XN = $XN{(POSIX::uname())[4]};
sub xnames { my ($path, $follow) = @_; my $buf = "\0" x 65536; my $n = syscall($follow ? $XN->[2] : $XN->[3], $path, $buf, 65536); return $n > 0 ? grep { /^user\.e2b\./ } split(/\0/, substr($buf, 0, $n)) : () }
sub meta { my ($p, $follow) = @_; return '' unless $XN; my $path = "$p"; my @kv;
  for my $name (xnames($path, $follow)) { my $nm = "$name"; my $v = "\0" x 65536; my $m = syscall($follow ? $XN->[0] : $XN->[1], $path, $nm, $v, 65536); push @kv, substr($name, 9), substr($v, 0, $m) if $m >= 0 }
  return unpack('H*', join("\0", @kv)) }
sub setmeta { my ($p, @kv) = @_; return 1 if !$XN && !@kv; $XN or do { $! = POSIX::EOPNOTSUPP; fault() }; my $path = "$p";
  for my $name (xnames($path, 1)) { my $nm = "$name"; syscall($XN->[5], $path, $nm) == 0 or fault() }
  while (@kv) { my ($k, $v) = splice(@kv, 0, 2); my $nm = "user.e2b.$k"; my $val = "$v"; syscall($XN->[4], $path, $nm, $val, 0 + length($val), 0) == 0 or fault() } 1 }
`;

/** The metadata meta() printed, or null for none. */
export function parseMetadata(hex: string | undefined): Record<string, string> | null {
  if (!hex) return null;
  const parts = Buffer.from(hex, 'hex').toString('utf8').split('\0');
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < parts.length; i += 2) out[parts[i]] = parts[i + 1];
  return Object.keys(out).length ? out : null;
}

/** Exit codes of the program: what went wrong, as E2B's errors name it. */
export const FAULTS: Record<number, 'not_found' | 'exists' | 'not_dir' | 'denied' | 'failed'> = { 2: 'not_found', 3: 'exists', 4: 'not_dir', 5: 'denied', 6: 'failed' };

export const FS_PROGRAM = String.raw`
use strict; use POSIX ();
my ($op, @a) = map { pack('H*', $_) } @ARGV;
${XATTR_PERL}
sub fault { my $e = $! + 0; exit(2) if $e == POSIX::ENOENT; exit(3) if $e == POSIX::EEXIST; exit(4) if $e == POSIX::ENOTDIR; exit(5) if $e == POSIX::EACCES || $e == POSIX::EPERM; print STDERR "$!\n"; exit 6 }
sub entry { my ($p) = @_; my $home = $p eq '${E2B_HOME}'; my @s = $home ? stat($p) : lstat($p); return 0 unless @s; my $t = (!$home && -l $p) ? 'symlink' : -d $p ? 'dir' : 'file'; my $l = $t eq 'symlink' ? readlink($p) : ''; if (length $l && $l !~ m{^/}) { (my $dir = $p) =~ s{/[^/]*$}{}; $l = "$dir/$l" }
  if ($t eq 'symlink') { my @f = stat $p; $s[7] = $f[7] if @f; }
  (my $n = $p) =~ s{.*/}{}; my $o = getpwuid($s[4]) // $s[4]; my $g = getgrgid($s[5]) // $s[5];
  print join("\t", unpack('H*', $n), unpack('H*', $p), $t, $s[7], $s[2] & 07777, $o, $g, $s[9], unpack('H*', $l // ''), meta($p, $home)), "\n"; 1 }
sub walk { my ($d, $depth) = @_; opendir(my $h, $d) or fault(); my @n = sort grep { $_ ne '.' && $_ ne '..' } readdir $h; closedir $h;
  for (@n) { my $p = $d eq '/' ? "/$_" : "$d/$_"; entry($p); walk($p, $depth - 1) if $depth > 1 && -d $p && !-l $p } }
sub mkp { my ($d) = @_; return 1 if -d $d; (my $up = $d) =~ s{/[^/]+$}{}; mkp($up) if length $up && !-d $up; mkdir $d or -d $d or fault() }
if ($op eq 'stat') { entry($a[0]) or fault() }
elsif ($op eq 'list') { -e $a[0] or fault(); -d $a[0] or do { $! = POSIX::ENOTDIR; fault() }; walk($a[0], $a[1] || 1) }
elsif ($op eq 'mkdir') { if (-e $a[0]) { $! = POSIX::EEXIST; fault() } mkp($a[0]); entry($a[0]) }
elsif ($op eq 'move') { -e $a[0] || -l $a[0] or fault(); (my $up = $a[1]) =~ s{/[^/]+$}{}; mkp($up) if length $up;
  rename($a[0], $a[1]) or do { $! + 0 == POSIX::EXDEV or fault(); system('mv', '-T', '--', $a[0], $a[1]) == 0 or do { $! = POSIX::EACCES; fault() } }; entry($a[1]) }
elsif ($op eq 'setmeta') { -e $a[0] or fault(); setmeta(@a); entry($a[0]) }
elsif ($op eq 'remove') { -e $a[0] || -l $a[0] or exit 0; system('rm', '-rf', '--', $a[0]) == 0 or do { $! = POSIX::EACCES; fault() } }
`;

/** Runs one operation: its entries, or the fault the program exited with. */
export async function fsOp(sb: SandboxContext, op: 'stat' | 'list' | 'mkdir' | 'move' | 'setmeta' | 'remove', ...args: string[]): Promise<{ entries: Entry[] } | { fault: string; message: string }> {
  const hexed = [op, ...args].map((s) => Buffer.from(s).toString('hex'));
  const r = await collect(sb, ['perl', '-e', FS_PROGRAM, ...hexed]);
  if (r.exitCode !== 0) return { fault: FAULTS[r.exitCode] ?? 'failed', message: r.stderr.trim() || `${op} failed` };
  const unhex = (h: string) => Buffer.from(h, 'hex').toString('utf8');
  const entries = r.stdout
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((line): Entry => {
      const [n, p, type, size, mode, owner, group, mtime, target, meta] = line.split('\t');
      return {
        name: unhex(n),
        path: unhex(p),
        type: type as EntryType,
        size: Number(size),
        mode: Number(mode),
        owner,
        group,
        mtimeS: Number(mtime),
        symlinkTarget: type === 'symlink' ? unhex(target ?? '') : null,
        metadata: parseMetadata(meta),
      };
    });
  return { entries };
}
