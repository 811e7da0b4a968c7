#!/bin/busybox sh
# agentvm initramfs: load the modules, mount the image's root read-only and hand over to tini + the
# guest agent. Nothing here is particular to one VM: the agent's `assume` gives the guest its
# identity, network and disks, so the same boot serves as a snapshot that many VMs resume from.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs dev /dev
# Terminals for the shells the agent opens (/dev/ptmx needs devpts mounted); gid 5 is Debian's tty group.
mkdir -p /dev/pts
mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts
mount -t proc proc /proc
mount -t sysfs sys /sys

while read -r m; do
  insmod "/modules/$m.ko" || echo "agentvm-init: cannot load $m"
done < /modules/order

hostname agentvm
ip link set lo up
# An idle guest wakes as little as it can: under emulation each wake-up costs its QEMU about a
# millisecond of CPU. No proactive compaction (kcompactd every 500 ms), VM statistics folded every
# 10 s rather than every second, no soft-lockup watchdog (a timer every 4 s).
echo 0 > /proc/sys/vm/compaction_proactiveness
echo 10 > /proc/sys/vm/stat_interval
echo 0 > /proc/sys/kernel/watchdog

root=
for s in /sys/block/vd*; do
  [ "$(cat "$s/serial" 2>/dev/null)" = root ] && root="/dev/${s##*/}"
done
if [ -z "$root" ] || ! mount -t ext4 -o ro,noload "$root" /newroot; then
  echo "agentvm-init: cannot mount the root disk" >&2
  poweroff -f
fi
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
# PID 1 of the root: the guest agent's parent, reaping every orphan, blocked in wait() with no timer
# (tini, before it, looked every second: under emulation each wake-up costs). Its end is the agent's.
exec switch_root /newroot /usr/bin/perl -e '
  $0 = "agentvm-init";
  my $agent = fork // die "fork: $!\n";
  if (!$agent) { exec "/usr/bin/node", "/opt/agentvm/agent.mjs"; die "node: $!\n"; }
  for (;;) {
    my $pid = wait;
    exit(($? >> 8) || 1) if $pid == $agent;
    select(undef, undef, undef, 1) if $pid < 0;
  }
'
