# pty: becomes a login shell on a terminal whose master side the guest agent holds. Node has no
# terminal calls of its own; perl-base (in every Debian root) has ioctl and POSIX, so this small
# program does what `login` would, then replaces itself with the shell.
#
# The agent opens /dev/ptmx and passes it as descriptor 3. In order: unlock the terminal and learn its
# number, set its size, start a session of our own, open the terminal's slave side (it becomes the
# session's controlling terminal), give it to the harness user, take the harness user's identity,
# go to the workspace, close the master, and exec the shell as a login shell (argv[0] "-bash").
# `ready` goes to descriptor 2 (a pipe the agent reads) just before it becomes the terminal.
#
# Arguments: uid gid cols rows dir shell.
use strict;
use POSIX ();

my ($uid, $gid, $cols, $rows, $dir, $shell) = @ARGV;
sub fail { print STDERR "error $_[0]: $!\n"; exit 1 }

open(my $master, '+<&=', 3) or fail('fd 3');
# TIOCSPTLCK (unlock the slave), TIOCGPTN (its number), TIOCSWINSZ (rows, cols).
my $unlock = pack('i', 0);
ioctl($master, 0x40045431, $unlock) or fail('unlockpt');
my $n = pack('i', 0);
ioctl($master, 0x80045430, $n) or fail('ptsname');
my $pts = '/dev/pts/' . unpack('i', $n);
my $winsize = pack('S4', $rows, $cols, 0, 0);
ioctl($master, 0x5414, $winsize) or fail('window size');

POSIX::setsid() or fail('setsid');
my $slave = POSIX::open($pts, POSIX::O_RDWR()) // fail("open $pts");
# Opened by a session leader without a terminal, it became the session's controlling terminal.
chown($uid, 5, $pts);   # the tty group, as login leaves it
chmod(0620, $pts);
POSIX::close(3);
print STDERR "ready $pts\n";
POSIX::dup2($slave, $_) // fail('dup2') for 0, 1, 2;
POSIX::close($slave) if $slave > 2;

# Groups first, then the group, then the user: afterwards nothing is root.
$) = "$gid $gid";
$( = $gid;
POSIX::setgid($gid) or fail('setgid');
POSIX::setuid($uid) or fail('setuid');
fail('still root') if $> == 0 || $< == 0;
chdir($dir) or chdir($ENV{HOME}) or chdir('/');
exec { $shell } '-' . (split m{/}, $shell)[-1] or fail("exec $shell");
