#!/bin/busybox sh
# agentvm initramfs: load the virtio modules, bring up the network the host assigned,
# mount the root overlay and hand over to tini + the guest agent.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs dev /dev
mount -t proc proc /proc
mount -t sysfs sys /sys

while read -r m; do
  insmod "/modules/$m.ko" || echo "agentvm-init: cannot load $m"
done < /modules/order

ip= gw= name=agentvm
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    agentvm.ip=*) ip="${arg#agentvm.ip=}" ;;
    agentvm.gw=*) gw="${arg#agentvm.gw=}" ;;
    agentvm.hostname=*) name="${arg#agentvm.hostname=}" ;;
  esac
done
hostname "$name"
ip link set lo up
if [ -n "$ip" ] && [ -e /sys/class/net/eth0 ]; then
  ip link set eth0 up
  ip addr add "$ip" dev eth0
  [ -n "$gw" ] && ip route add default via "$gw"
fi

root=
for s in /sys/block/vd*; do
  [ "$(cat "$s/serial" 2>/dev/null)" = root ] && root="/dev/${s##*/}"
done
if [ -z "$root" ] || ! mount -t ext4 -o noatime "$root" /newroot; then
  echo "agentvm-init: cannot mount the root disk" >&2
  poweroff -f
fi
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
echo "$name" > /newroot/etc/hostname 2>/dev/null
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
exec switch_root /newroot /usr/bin/tini -- /usr/bin/node /opt/agentvm/agent.mjs
