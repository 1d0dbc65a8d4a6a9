#!/usr/bin/env bash
# mkimage.sh OUT KERNEL
# Builds the emulated site's OS image, OUT (a zstd-compressed raw disk,
# 64 MiB), that boots on legacy BIOS and UEFI alike:
#   - an MBR partition table with one bootable partition of type 0xef (the
#     EFI system partition), FAT16, made in a file (no loop device, no mount);
#   - SYSLINUX for BIOS (syslinux's mbr.bin in the MBR, ldlinux.sys installed
#     in the partition by `syslinux --install`) and for UEFI
#     (\EFI\BOOT\BOOTX64.EFI is syslinux.efi), both reading the same config;
#   - KERNEL (Debian's, the ramdisk's) and an initramfs whose /init is
#     osinit, a static Go program that prints its marker on ttyS0.
# Debian packages: syslinux syslinux-common syslinux-efi mtools dosfstools
# fdisk cpio zstd.
set -euo pipefail
out=$1 kernel=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/root/dev" "$work/root/proc" "$work/root/sys"
(cd "$here/osinit" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/root/init" .)
(cd "$work/root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) | gzip -9n > "$work/initrd.img"

cat > "$work/syslinux.cfg" <<'CFG'
SERIAL 0 115200
DEFAULT os
PROMPT 0
TIMEOUT 0
LABEL os
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0 panic=10
CFG

size_mib=64
truncate -s "${size_mib}M" "$work/disk.img"
echo 'start=2048, type=ef, bootable' | sfdisk -q --label dos "$work/disk.img"
part_kib=$(( size_mib * 1024 - 1024 ))
mkfs.vfat -F 16 -n BCOS -i 0bc05e17 -C "$work/part.img" "$part_kib" >/dev/null
syslinux --install "$work/part.img"
mcopy -i "$work/part.img" "$kernel" ::/vmlinuz
mcopy -i "$work/part.img" "$work/initrd.img" "$work/syslinux.cfg" ::/
mmd -i "$work/part.img" ::/EFI ::/EFI/BOOT
mcopy -i "$work/part.img" /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$work/part.img" /usr/lib/syslinux/modules/efi64/ldlinux.e64 "$work/syslinux.cfg" ::/EFI/BOOT/
dd if="$work/part.img" of="$work/disk.img" bs=1M seek=1 conv=notrunc status=none
dd if=/usr/lib/syslinux/mbr/mbr.bin of="$work/disk.img" bs=440 count=1 conv=notrunc status=none
mkdir -p "$(dirname "$out")"
zstd -q -f -19 "$work/disk.img" -o "$out"
echo "$out: $(stat -c %s "$out") bytes, zstd of a ${size_mib} MiB raw disk ($(sha256sum "$out" | cut -c1-16)…)"
