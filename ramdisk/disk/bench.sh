#!/usr/bin/env bash
# bench.sh: time `zstd -dc image | dd of=disk bs=4M` against disk.WriteImage on
# the same images in the same run, and print the ratio. Images: a full one
# (every block compressible data) and a mostly empty one (5% of blocks data).
# Needs zstd (apt-get install -y zstd) and about 2x SIZE of free disk space.
#
#   ramdisk/disk/bench.sh [SIZE_MIB]   (default 1024)
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

size_mib=${1:-1024}
size=$((size_mib << 20))
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v zstd >/dev/null || { echo "bench.sh: zstd not found: apt-get install -y zstd" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/benchcmd" ./ramdisk/disk/internal/benchcmd)

now() { date +%s.%N; }

printf '%-8s %10s %10s %12s %12s %8s\n' image "MiB" "zst MiB" "dd s" "WriteImage s" "ratio"
for kind in full sparse; do
	"$work/benchcmd" gen -kind "$kind" -size "$size" -out "$work/$kind.raw"
	zstd -q -3 -T0 --rm -o "$work/$kind.raw.zst" "$work/$kind.raw"
	zst_mib=$(( $(stat -c %s "$work/$kind.raw.zst") >> 20 ))

	truncate -s "$size" "$work/dd.disk"
	t0=$(now)
	zstd -dc "$work/$kind.raw.zst" | dd of="$work/dd.disk" bs=4M conv=notrunc,fsync status=none
	t1=$(now)
	dd_s=$(echo "$t1 - $t0" | bc -l)
	rm -f "$work/dd.disk"

	truncate -s "$size" "$work/go.disk"
	read -r go_s _ < <("$work/benchcmd" write -image "$work/$kind.raw.zst" -compression zstd -disk "$work/go.disk" 2>/dev/null)
	rm -f "$work/go.disk" "$work/$kind.raw.zst"

	printf '%-8s %10d %10d %12.3f %12.3f %8.2f\n' "$kind" "$size_mib" "$zst_mib" "$dd_s" "$go_s" "$(echo "$go_s / $dd_s" | bc -l)"
done
echo "ratio = WriteImage time / (zstd -dc | dd conv=fsync) time; below 1 means WriteImage is faster"
