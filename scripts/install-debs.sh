#!/usr/bin/env bash
# Installs the Debian packages agentvm needs, when they are missing (needs root for that).
#   install-debs.sh          what the test suite needs: the VM packages, a PostgreSQL server and Chromium
#   install-debs.sh --vms    what `serve` needs to run VMs (`npm start` runs this first)
set -euo pipefail
# QEMU (microvm) and qemu-img run the VMs; debootstrap, a static busybox, cpio, lz4 and e2fsprogs
# build the guest image on the first start; util-linux's setpriv ties a golden VM to its server.
# (A guest's connections to its egress gateway go on its data port: no program per connection. Each
# VM's QEMU runs as a numeric user of its own, AGENTVM_QEMU_UID_BASE + its network slot: no account
# is made for it.)
packages=(qemu-system-x86 qemu-utils debootstrap busybox-static cpio lz4 e2fsprogs util-linux)
# postgresql: the second database backend of the tests; chromium (and a font for its pages): the browser
# the console's test drives.
[ "${1:-}" = "--vms" ] || packages+=(postgresql chromium fonts-liberation)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "agentvm needs these Debian packages to run VMs: ${missing[*]}" >&2
  echo "install them as root: apt-get install ${missing[*]}" >&2
  # Without them the API still serves; /readyz says what is missing.
  [ "${1:-}" = "--vms" ] && exit 0
  exit 1
fi
echo "installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
