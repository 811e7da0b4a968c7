# files: opens one path of the files API as the harness user, for the guest agent. The agent (root)
# starts it; it drops to the user first, then walks the path one name at a time from /, each step an
# openat() relative to the directory before it with O_NOFOLLOW, so no symbolic link is ever followed by
# the kernel: a link is read (readlinkat), its target joined to where the walk is, checked to stay on
# the persist disk, and walked again from /. A link swapped in at any moment changes nothing: the walk
# holds descriptors, never paths. What the user may not read or write, it cannot open. Node has no
# openat, perl-base has syscall(); no module is loaded (each costs a guest several milliseconds).
#
# Arguments: arch uid gid root reserved op path [twin]. op `read`: answers `dir FD` or `file FD` (a
# descriptor the agent opens again as /proc/PID/fd/FD while this waits), then waits for its stdin to
# end. op `write`: makes the missing parents (mode 0755), creates the hidden twin `twin` beside the
# target (0644, O_EXCL) and answers `twin FD`; a line `commit` renames the twin over the target
# (answered `ok`), anything else or the end of stdin removes it. A refusal is `fault CODE MESSAGE`.
# Once its uids change the kernel makes it undumpable: the user cannot trace it or reach its
# descriptors through /proc.
use strict;

my ($arch, $uid, $gid, $root, $reserved, $op, $path, $twin) = @ARGV;
$| = 1;
sub fault { my ($code, $msg) = @_; $msg =~ s/\n/ /g; print "fault $code $msg\n"; exit 0 }
sub fail { print STDERR "files: $_[0]: $!\n"; exit 1 }

# System call numbers and the open flags that differ between the two architectures.
my %ARCH = (
  x64 => { openat => 257, mkdirat => 258, unlinkat => 263, renameat => 264, readlinkat => 267, close => 3,
           setgroups => 116, setresuid => 117, setresgid => 119, prctl => 157, O_DIRECTORY => 0x10000, O_NOFOLLOW => 0x20000 },
  arm64 => { openat => 56, mkdirat => 34, unlinkat => 35, renameat2 => 276, readlinkat => 78, close => 57,
             setgroups => 159, setresuid => 147, setresgid => 149, prctl => 167, O_DIRECTORY => 0x4000, O_NOFOLLOW => 0x8000 },
);
my $N = $ARCH{$arch} or fail("no system call numbers for $arch");
my ($O_RDONLY, $O_WRONLY, $O_CREAT, $O_EXCL, $O_NOCTTY, $O_NONBLOCK, $O_PATH) = (0, 1, 0x40, 0x80, 0x100, 0x800, 0x200000);
my ($O_DIRECTORY, $O_NOFOLLOW) = ($N->{O_DIRECTORY}, $N->{O_NOFOLLOW});
my ($ENOENT, $EACCES, $EEXIST, $ENOTDIR, $EISDIR, $EINVAL, $ELOOP, $EPERM) = (2, 13, 17, 20, 21, 22, 40, 1);
my $AT_FDCWD = -100;

# Groups, group, user; then undumpable for certain (PR_SET_DUMPABLE 0), whatever suid_dumpable says.
my $groups = pack('L', $gid);
syscall($N->{setgroups}, 1, $groups) == 0 or fail('setgroups');
syscall($N->{setresgid}, 0 + $gid, 0 + $gid, 0 + $gid) == 0 or fail('setresgid');
syscall($N->{setresuid}, 0 + $uid, 0 + $uid, 0 + $uid) == 0 or fail('setresuid');
syscall($N->{prctl}, 4, 0, 0, 0, 0) == 0 or fail('prctl');
fail('still root') if $> == 0 || $< == 0;
umask 022;

# syscall() passes a string argument by its pointer and wants it writable: each is a copy.
sub openat { my ($dir, $name, $flags, $mode) = @_; syscall($N->{openat}, 0 + $dir, $name, 0 + $flags, 0 + ($mode // 0)) }
sub closefd { syscall($N->{close}, 0 + $_[0]) }
sub readlinkat {
  my ($dir, $name) = @_;
  my $buf = "\0" x 4097;
  my $n = syscall($N->{readlinkat}, 0 + $dir, $name, $buf, 4096);
  return undef if $n < 0;
  return substr($buf, 0, $n);
}
sub renameat {
  my ($from_dir, $from, $to_dir, $to) = @_;
  return syscall($N->{renameat}, 0 + $from_dir, $from, 0 + $to_dir, $to) if $N->{renameat};
  return syscall($N->{renameat2}, 0 + $from_dir, $from, 0 + $to_dir, $to, 0);
}
sub mkdirat { my ($dir, $name) = @_; syscall($N->{mkdirat}, 0 + $dir, $name, 0755) }
sub unlinkat { my ($dir, $name) = @_; syscall($N->{unlinkat}, 0 + $dir, $name, 0) }

sub inside { my $p = shift; ($p eq $root || index($p, "$root/") == 0) && !($p eq $reserved || index($p, "$reserved/") == 0) }
# A path with `.` and `..` taken away by its letters (a link's target is read as text, never followed).
sub clean {
  my @out;
  for (split m{/}, $_[0]) {
    next if $_ eq '' || $_ eq '.';
    if ($_ eq '..') { pop @out } else { push @out, $_ }
  }
  '/' . join('/', @out);
}

my $shown = $path;
my $links = 0;
# A write through a link goes only to a file that is there.
my $through = 0;
WALK: for (;;) {
  fault('path', "$shown leads to $path, off the persist disk (a symbolic link points out)") unless inside($path);
  my @parts = grep { length } split m{/}, $path;
  my $base = pop @parts;
  my $dir = openat($AT_FDCWD, '/', $O_PATH | $O_DIRECTORY);
  fail('open /') if $dir < 0;
  my $at = '';
  # A link met on the way: the walk starts again from / with its target in its place.
  my $follow = sub {
    my ($target, @rest) = @_;
    fault('path', "$shown: too many symbolic links") if ++$links > 40;
    $path = clean(join('/', (substr($target, 0, 1) eq '/' ? $target : "$at/$target"), @rest));
    closefd($dir);
  };
  for my $i (0 .. $#parts) {
    my $name = $parts[$i];
    my $fd = openat($dir, $name, $O_PATH | $O_DIRECTORY | $O_NOFOLLOW);
    if ($fd < 0 && $! == $ENOENT && $op eq 'write' && !$through) {
      if (mkdirat($dir, $name) < 0 && $! != $EEXIST) {
        fault('path', "$at/$name: permission denied (files are written as the user agent)") if $! == $EACCES || $! == $EPERM;
        fail("mkdir $at/$name");
      }
      $fd = openat($dir, $name, $O_PATH | $O_DIRECTORY | $O_NOFOLLOW);
    }
    if ($fd < 0) {
      fault('not_found', "$shown does not exist") if $! == $ENOENT;
      fault('path', "$at/$name: permission denied (files are read and written as the user agent)") if $! == $EACCES;
      if ($! == $ENOTDIR || $! == $ELOOP) {
        my $target = readlinkat($dir, $name);
        if (defined $target) {
          $follow->($target, @parts[$i + 1 .. $#parts], $base);
          next WALK;
        }
        fault('path', "$shown: a part of it is not a directory");
      }
      fail("open $at/$name");
    }
    closefd($dir);
    $dir = $fd;
    $at .= "/$name";
  }
  $base //= '';
  my $target = length $base ? readlinkat($dir, $base) : undef;
  if (defined $target) {
    $through = 1;
    $follow->($target);
    next WALK;
  }
  my $missing = length $base && $! == $ENOENT;
  fault('path', "$at/$base: permission denied (files are read and written as the user agent)") if length $base && $! == $EACCES;

  if ($op eq 'read') {
    fault('not_found', "$shown does not exist") if $missing;
    my $p = length $base ? openat($dir, $base, $O_PATH | $O_NOFOLLOW) : $dir;
    fault('not_found', "$shown does not exist") if $p < 0 && $! == $ENOENT;
    fail("open $at/$base") if $p < 0;
    # Opened again as the user, for reading: the kernel checks the user may. A link swapped in since
    # cannot be opened so (ELOOP): the walk starts again.
    my @st = stat("/proc/self/fd/$p");
    my $isdir = @st && ($st[2] & 0170000) == 0040000;
    my $isreg = @st && ($st[2] & 0170000) == 0100000;
    # A link swapped in after it was read as none: the walk starts again.
    if (@st && ($st[2] & 0170000) == 0120000 && ++$links <= 40) { closefd($p); closefd($dir); next WALK }
    fault('path', "$shown is not a regular file or a directory") unless $isdir || $isreg;
    my $fd = openat($AT_FDCWD, "/proc/self/fd/$p", $isdir ? $O_RDONLY | $O_DIRECTORY : $O_RDONLY | $O_NOCTTY | $O_NONBLOCK);
    if ($fd < 0) {
      fault('path', "$shown: permission denied (files are read as the user agent)") if $! == $EACCES;
      if ($! == $ELOOP && ++$links <= 40) { next WALK }
      fail("open $shown");
    }
    print(($isdir ? 'dir' : 'file'), " $fd\n");
    1 while <STDIN>;
    exit 0;
  }

  # write
  fault('path', "$shown is a symbolic link to nothing") if $missing && $through;
  fault('path', "$shown is a directory") if !length $base || openat($dir, $base, $O_PATH | $O_DIRECTORY | $O_NOFOLLOW) >= 0;
  my $fd = openat($dir, $twin, $O_WRONLY | $O_CREAT | $O_EXCL | $O_NOFOLLOW | $O_NOCTTY, 0644);
  if ($fd < 0) {
    fault('path', "$at: permission denied (files are written as the user agent)") if $! == $EACCES || $! == $EPERM;
    fail("create $at/$twin");
  }
  print "twin $fd\n";
  my $said = <STDIN> // '';
  if ($said eq "commit\n") {
    if (renameat($dir, $twin, $dir, $base) == 0) {
      print "ok\n";
      exit 0;
    }
    my $why = $! == $EISDIR ? "$shown is a directory" : "renaming the upload into place: $!";
    unlinkat($dir, $twin);
    fault('path', $why);
  }
  unlinkat($dir, $twin);
  exit 0;
}
