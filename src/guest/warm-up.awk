# A standby VM's warm-up run (see src/vmm/standby.ts), as the harness user, with mawk as the echo
# harness runs: a byte appended to a file in each directory named, read back, and the files removed,
# so the code a VM's first run goes through (a process of the harness user, mawk, appends on the
# persist disk and on the root's layer, /proc reads) is translated before any VM is the standby's.
# It leaves nothing behind, and nothing for the kernel to write back: `sync` writes what the standby's
# start and this run left dirty now, while the host is idle, not 30 s later (the kernel's age for
# dirty data) in the middle of creates.
BEGIN {
  gone = ""
  for (i = 1; i < ARGC; i++) {
    f = ARGV[i] "/.agentvm-warm"
    printf "x" >> f
    close(f)
    getline s < f
    close(f)
    gone = gone " '" f "'"
  }
  getline s < "/proc/sys/kernel/hostname"
  exit system("rm -f" gone " && sync")
}
