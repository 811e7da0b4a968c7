#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, when they are missing (needs root for that).
set -euo pipefail
# postgresql: the second database backend of the tests. The rest runs VMs and builds the guest image:
# QEMU (microvm), qemu-img, debootstrap, a static busybox and cpio for the initramfs, lz4 for the
# kernel payload, e2fsprogs for the ext4 images.
packages=(postgresql qemu-system-x86 qemu-utils debootstrap busybox-static cpio lz4 e2fsprogs)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
