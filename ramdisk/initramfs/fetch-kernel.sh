#!/usr/bin/env bash
# fetch-kernel.sh DIR: extracts Debian's linux-image-amd64 kernel package
# (the linux-image-<release> its metapackage depends on; KERNEL_PACKAGE
# overrides it) into DIR/root with apt-get download and dpkg-deb -x, and
# prints DIR/root. Nothing is installed; an extracted release is reused.
set -euo pipefail
dir=$1
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt-cache show linux-image-amd64 >/dev/null 2>&1 || $sudo apt-get update -qq
pkg=${KERNEL_PACKAGE:-$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')}
[ -n "$pkg" ] || { echo "error: apt knows no linux-image-amd64 (is this Debian 12? run apt-get update)" >&2; exit 1; }
if [ ! -f "$dir/root/boot/vmlinuz-${pkg#linux-image-}" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  chmod 777 "$dir" # apt-get download runs as _apt when it can
  (cd "$dir" && apt-get download -q "$pkg" >&2)
  dpkg-deb -x "$dir/${pkg}"_*.deb "$dir/root"
  rm -f "$dir/${pkg}"_*.deb
fi
echo "$dir/root"
