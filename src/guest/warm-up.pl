# A standby VM's warm-up run (see src/vmm/standby.ts), as the harness user: a file written, renamed and
# removed in each directory named, so the code a VM's first run goes through (a process of the
# harness user, Perl with strict and warnings, writes on the persist disk and on the root's layer)
# is translated before any VM is the standby's. It leaves nothing behind.
for my $d (@ARGV) {
  my $f = "$d/.agentvm-warm";
  open(my $h, '>', $f) or next;
  print $h "1\n";
  close($h);
  rename($f, "$f.1");
  unlink("$f.1");
}
