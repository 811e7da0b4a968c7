# assume: makes a booted guest a particular VM, as one Perl program (perl-base is in every Debian root).
# Under emulation each process a guest starts costs tens of milliseconds, so a clone's whole change of
# identity is one process making system calls, not a script of a dozen commands.
#
# In order: set the clock (a clone wakes with its golden VM's), mix host randomness into the pool with
# credit and reseed the CRNG, take the hostname, configure eth0 and the default route, mount the VM's
# root layer and make the overlay of it on the read-only base the root of every process (pivot_root),
# write the VM's /etc identity, mount the persist disk. A blank disk (a VM made before disks came
# pre-formatted) gets a filesystem first.
#
# The guest agent starts it (`perl -e`, the text inlined into the agent's bundle) when it starts, and it
# waits for its one line of arguments on its own virtio port (agentvm.assume, ASSUME_PORT_NAME), so in
# a golden VM it is already running, compiled and blocked in that read when the snapshot is taken: a
# clone's host writes a line and this program alone wakes, without a round through the agent.
#
# Input: one line of space-separated key=value pairs (assumeLine in protocol.ts). Output, on the port
# and in /run/agentvm/assumed (ASSUMED_FILE): key=value lines, then `end`; `error=...` when it could not.
#
# A standby VM (`standby=1`: made ahead of need, its disks fresh, see the driver's standby pool) does
# all of the above for a provisional identity, answers, and waits for a second line: the VM it becomes.
# Then only what names a VM changes (clock, RNG reseeded again, hostname, machine id, /etc, instance),
# on code paths this guest has run once already, so under emulation they cost little.
use strict;
my $port;
until ($port) {
  opendir(my $d, '/sys/class/virtio-ports') or die "virtio-ports: $!\n";
  for my $e (readdir $d) {
    open(my $n, '<', "/sys/class/virtio-ports/$e/name") or next;
    my $name = <$n> // '';
    $name =~ s/\s+$//;
    $port = "/dev/$e" if $name eq 'agentvm.assume';
  }
  select(undef, undef, undef, 0.05) unless $port;
}
open(my $io, '+<', $port) or die "$port: $!\n";
# One line of key=value pairs from the host. While no host is on the other end a read answers nothing
# at once: look again shortly, and after the identity (`$patient`) less and less often, up to a second.
my $patient = 0;
sub read_args {
  my $line = '';
  my $wait = 0.02;
  until ($line =~ /\n/) {
    my $n = sysread($io, my $buf, 4096);
    if (!$n) {
      select(undef, undef, undef, $wait);
      $wait = $wait * 2 > 1 ? 1 : $wait * 2 if $patient;
      next;
    }
    $line .= $buf;
  }
  chomp $line;
  return map { split /=/, $_, 2 } split / /, $line;
}
my %a = read_args();
my @out;
sub say_ { push @out, "$_[0]=$_[1]\n"; }
# Where the time goes: the monotonic clock (clock_gettime, CLOCK_MONOTONIC) after each step, answered
# as `steps_ms=name:ms,...` (each step's own milliseconds), for the host's log of a start's phases.
sub mono { my $ts = pack('q q', 0, 0); syscall(228, 1, $ts); my ($s, $ns) = unpack('q q', $ts); return $s * 1000 + $ns / 1e6; }
my $mark = mono();
my @steps;
sub step { my $now = mono(); push @steps, sprintf('%s:%d', $_[0], $now - $mark + 0.5); $mark = $now; }
my %SYS = (clock_settime => 227, mount => 165, umount2 => 166, pivot_root => 155);
my ($MS_NOATIME, $MS_BIND, $MS_MOVE, $MNT_DETACH) = (1024, 4096, 8192, 2);
my $ip;
# The persist disk's lines of the answer (a standby's second answer repeats them).
my @persist_out;

sub put { my ($f, $v) = @_; open(my $h, '>', $f) or die "$f: $!\n"; print $h $v; close($h) or die "$f: $!\n"; }
sub mnt {
  my ($src, $dst, $type, $flags, $data) = @_;
  # syscall() hands the kernel writable copies of strings; numbers (0) go as NULL.
  syscall($SYS{mount}, $src, $dst, defined $type ? $type : 0, $flags, defined $data ? $data : 0) == 0 or die "mount $dst: $!\n";
}
sub is_ext { my ($d) = @_; open(my $h, '<', $d) or die "$d: $!\n"; sysseek($h, 1080, 0); sysread($h, my $m, 2); return $m eq "\x53\xef"; }
sub ensure_fs {
  my ($d, $label) = @_;
  return 0 if is_ext($d);
  system('mkfs.ext4', '-q', '-F', '-L', $label, '-E', 'lazy_itable_init=1,lazy_journal_init=1', $d) == 0 or die "mkfs.ext4 $d failed\n";
  return 1;
}
sub sin4 { pack('S n C4 x8', 2, 0, split(/\./, $_[0])) }

# The clock, the RNG and the kernel's hostname: what names a VM in memory.
sub clock_random_hostname {
  syscall($SYS{clock_settime}, 0, pack('q q', $a{sec}, $a{nsec})) == 0 or die "clock_settime: $!\n";
  step('clock');
  open(my $rnd, '+<', '/dev/random') or die "/dev/random: $!\n";
  my $ent = pack('H*', $a{entropy});
  ioctl($rnd, 0x40085203, pack('i i', length($ent) * 8, length($ent)) . $ent) or die "RNDADDENTROPY: $!\n";
  ioctl($rnd, 0x5207, 0) or die "RNDRESEEDCRNG: $!\n";
  close($rnd);
  step('random');
  put('/proc/sys/kernel/hostname', $a{hostname});
  step('hostname');
}

# A branch's boot id: the kernel makes its boot id once, at its first read, and the VM a branch was
# taken of had read it, so each VM made from it would show that VM's. The host's new one (`boot_id`;
# else the reseeded RNG's UUID) is kept in /run/agentvm/boot_id and bound over the kernel's file; a
# branch of a branch rewrites the file already bound (same inode). Run after etc_files: its writes
# are then on code paths just run (under emulation, 5 ms less).
sub fresh_boot_id {
  my $id = $a{boot_id};
  if (!defined $id) {
    open(my $u, '<', '/proc/sys/kernel/random/uuid') or die "uuid: $!\n";
    $id = <$u> // '';
    chomp $id;
  }
  $id =~ /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/ or die "boot_id: not a UUID\n";
  my $bound = -e '/run/agentvm/boot_id';
  put('/run/agentvm/boot_id', "$id\n");
  mnt('/run/agentvm/boot_id', '/proc/sys/kernel/random/boot_id', undef, $MS_BIND) unless $bound;
  step('boot_id');
}

# What names a VM on its root: /etc and the instance.
# The image makes these four files links into /run/agentvm/etc (tmpfs); a root layer of an older image
# may hold them as files, written in place.
sub etc_files {
  mkdir $_ for '/run/agentvm', '/run/agentvm/etc';
  put('/etc/hostname', "$a{hostname}\n");
  put('/etc/machine-id', "$a{machine_id}\n");
  put('/etc/hosts', "127.0.0.1\tlocalhost\n$ip\t$a{hostname}\n$a{egress}\t$a{egress_name}\n");
  put('/etc/resolv.conf', "nameserver $a{dns}\n");
  put('/run/agentvm/instance', "$a{instance_id}\n");
}

# The answer's facts, also left in /run/agentvm/assumed for the agent.
sub facts {
  push @out, @persist_out;
  say_('instance_id', $a{instance_id});
  say_('hostname', $a{hostname});
  say_('ipv4', $ip);
  if (open(my $u, '<', '/proc/uptime')) { my ($up) = split / /, scalar <$u>; say_('uptime_s', $up); }
  # The kernel makes its boot id at its first read: here, after the reseed, so each VM has its own
  # (the guest agent never reads it before it has an identity, so no golden snapshot holds one).
  if (open(my $b, '<', '/proc/sys/kernel/random/boot_id')) { my $id = <$b> // ''; chomp $id; say_('boot_id', $id); }
  # What the agent knew when it started (image facts); the host needs nothing more from it now.
  if (open(my $st, '<', '/run/agentvm/static')) { push @out, grep { /=/ } <$st>; }
  step('facts');
  say_('steps_ms', join(',', @steps));
  put('/run/agentvm/assumed', join('', @out));
}

sub answer {
  if ($@) { my $e = $@; $e =~ s/\s+$//; $e =~ s/\n/ /g; @out = ("error=$e\n"); }
  syswrite($io, join('', @out) . "end\n");
}

# No network card: the guest's address and the egress gateway's are aliases of its loopback (lo:0,
# lo:1, each a /32), and nothing else is routed, so a connection anywhere else fails at once (no route
# to it). The guest agent serves the gateway's address and carries each connection to the host on the
# data port (egress.ts).
sub network {
  socket(my $s, 2, 2, 0) or die "socket: $!\n";
  ($ip) = split m{/}, $a{ipv4};
  for my $alias (['lo:0', $ip], ['lo:1', $a{egress}]) {
    my ($label, $addr) = @$alias;
    next unless $addr;
    ioctl($s, 0x8916, pack('a16 a16 x8', $label, sin4($addr))) or die "SIOCSIFADDR $label: $!\n";
    ioctl($s, 0x891c, pack('a16 a16 x8', $label, sin4('255.255.255.255'))) or die "SIOCSIFNETMASK $label: $!\n";
  }
  close($s);
  step('network');
}

eval {
clock_random_hostname();
network();

# The VM's disks: on a clone they are plugged in as it resumes, and appear while the above ran. A
# disk counts once its device opens: the node can be there a moment before the disk is ready
# (ENXIO, seen once as a clone's start failed and it booted cold).
sub disk {
  my ($model) = @_;
  for (my $i = 0; $i * 5 < $a{disk_wait_ms}; $i++) {
    opendir(my $d, '/sys/block') or die "/sys/block: $!\n";
    for my $n (grep { /^sd/ } readdir($d)) {
      open(my $m, '<', "/sys/block/$n/device/model") or next;
      my $got = <$m> // '';
      $got =~ s/\s+$//;
      next unless $got eq $model && -b "/dev/$n";
      open(my $dev, '<', "/dev/$n") or next;
      close($dev);
      return "/dev/$n";
    }
    select(undef, undef, undef, 0.005);
  }
  return '';
}
$a{upper} = disk($a{upper_model}) or die "no $a{upper_model} disk appeared\n";
$a{persist} = disk($a{persist_model});
say_('persist_device', $a{persist});
step('disks');
ensure_fs($a{upper}, 'root');
mnt('agentvm', '/mnt', 'tmpfs', 0, 'mode=0755');
mkdir $_ for '/mnt/upper', '/mnt/root';
mnt($a{upper}, '/mnt/upper', 'ext4', $MS_NOATIME, 'noinit_itable');
mkdir $_ for '/mnt/upper/root', '/mnt/upper/work';
mnt('overlay', '/mnt/root', 'overlay', 0, 'lowerdir=/,upperdir=/mnt/upper/root,workdir=/mnt/upper/work');
mnt($_, "/mnt/root$_", undef, $MS_MOVE) for '/dev', '/proc', '/sys', '/tmp', '/run';
chdir('/mnt/root') or die "chdir: $!\n";
my ($new, $old) = ('.', 'mnt');
syscall($SYS{pivot_root}, $new, $old) == 0 or die "pivot_root: $!\n";
chdir('/');
my $gone = '/mnt';
syscall($SYS{umount2}, $gone, $MNT_DETACH) == 0 or die "umount /mnt: $!\n";
step('root');

etc_files();

if (!$a{persist}) {
  say_('persist_error', 'no persist disk attached');
} else {
  my $formatted = eval {
    my $f = ensure_fs($a{persist}, 'persist');
    mkdir '/persist';
    mnt($a{persist}, '/persist', 'ext4', $MS_NOATIME, 'noinit_itable');
    # The harness user's workspace and home; the root-only place for secrets.
    for my $d ($a{workspace}, $a{home}) {
      mkdir $d;
      my @st = stat($d) or die "$d: $!\n";
      chown($a{uid}, $a{gid}, $d) if $st[4] != $a{uid};
    }
    chmod(0700, $a{home});
    mkdir($a{secrets_dir}, 0700);
    chmod(0700, $a{secrets_dir});
    $f;
  };
  if ($@) { my $e = $@; $e =~ s/\s+$//; say_('persist_error', $e); } else { say_('persist_mounted', 1); say_('persist_formatted', $formatted); }
}
step('persist');
@persist_out = @out;
@out = ();
facts();
};
answer();

# A standby: the second line names the VM it becomes; its network, root and disks stay as they are.
if ($a{standby} && !$@) {
  my %b = read_args();
  $a{$_} = $b{$_} for qw(sec nsec entropy hostname machine_id instance_id);
  (@out, @steps) = ();
  $mark = mono();
  eval {
    clock_random_hostname();
    etc_files();
    step('etc');
    facts();
  };
  answer();
}

# Then it stays, blocked on its port (the host keeps it connected), for the host's clock: a VM resumed
# from its suspend wakes with the time it was saved at, and the host's first line to it is `sec=…
# nsec=…`, answered `clock=ok` and `end`. This program's read is all that wakes for it: under emulation
# a resumed guest translates every code path afresh, and the guest agent's way (Node, then a pipe to
# a Perl program of its own) cost a resume 100–150 ms more.
#
# After the answer (the VM is running without waiting for it), the guest's TCP connections to its
# gateway are ended (`ss -K`, the kernel's tcp_diag): their other end went with the QEMU that was
# suspended (QEMU's user-mode network does not save a connection it hands to a program), and nothing
# would tell the guest, whose program in the middle of a request would wait on it for ever. Ended, the
# program sees ECONNABORTED at once and can ask again.
#
# A VM made from a snapshot of another (a branch) wakes as that VM was, this program blocked here: the
# host's first line to it is then a whole identity (a line with `hostname`), taken as a standby takes
# its second line, with its own address and gateway and a boot id of its own too, and answered as the
# first line was.
exit if $@;
$patient = 1;
for (;;) {
  my %c = read_args();
  if (defined $c{hostname}) {
    my $was = $a{egress};
    $a{$_} = $c{$_} for grep { defined $c{$_} } qw(sec nsec entropy hostname machine_id instance_id ipv4 dns egress egress_name);
    $a{boot_id} = $c{boot_id};
    (@out, @steps) = ();
    $mark = mono();
    eval {
      clock_random_hostname();
      network();
      etc_files();
      step('etc');
      fresh_boot_id();
      facts();
    };
    answer();
    end_connections($was) unless $@;
    next;
  }
  my $err = !($c{sec} =~ /^\d+$/ && $c{nsec} =~ /^\d+$/) ? 'a clock line is sec=... nsec=...'
    : syscall($SYS{clock_settime}, 0, pack('q q', $c{sec}, $c{nsec})) == 0 ? '' : "clock_settime: $!";
  syswrite($io, ($err ? "error=$err\n" : "clock=ok\n") . "end\n");
  end_connections($a{egress}) unless $err;
}

# Whether the guest holds a TCP connection to address `dst` (IPv4, or IPv4-mapped on an IPv6 socket):
# /proc/net/tcp{,6} print an address as the hex of each 32-bit word in the machine's (little-endian)
# order, so 10.224.0.4 is 0400E00A.
sub connected_to {
  my ($dst) = @_;
  my $hex = sprintf('%08X', unpack('V', pack('C4', split(/\./, $dst))));
  for my $f (['/proc/net/tcp', $hex], ['/proc/net/tcp6', "0000000000000000FFFF0000$hex"]) {
    open(my $t, '<', $f->[0]) or next;
    while (my $row = <$t>) { my @c = split ' ', $row; return 1 if index($c[2] // '', "$f->[1]:") == 0; }
  }
  return 0;
}

# Ends the guest's TCP connections to a gateway address (see above). Most VMs hold none as they are
# suspended: then no `ss` is started (a process's start is what costs a resumed guest, under emulation,
# while the first requests of its wake are answered).
sub end_connections {
  my ($dst) = @_;
  return unless $dst && connected_to($dst);
  my $pid = fork();
  if (defined $pid && $pid == 0) {
    open(STDIN, '<', '/dev/null');
    open(STDOUT, '>', '/dev/null');
    open(STDERR, '>', '/dev/null');
    exec('/usr/bin/ss', '-K', '-t', 'dst', $dst);
    exit 127;
  }
  waitpid($pid, 0) if $pid;
}
