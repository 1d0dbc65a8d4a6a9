#!/usr/bin/env bash
# bench.sh: time `zstd -dc image | dd of=disk bs=4M` against disk.WriteImage on
# the same images in the same run, and print the ratio. Images: a full one
# (every block compressible data) and a mostly empty one (5% of blocks data).
# Needs zstd (apt-get install -y zstd) and about 2x SIZE of free disk space.
#
#   RUNS=3 ramdisk/disk/bench.sh [SIZE_MIB]   (default 1024 MiB, best of RUNS)
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

size_mib=${1:-1024}
size=$((size_mib << 20))
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v zstd >/dev/null || { echo "bench.sh: zstd not found: apt-get install -y zstd" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/benchcmd" ./ramdisk/disk/internal/benchcmd)

runs=${RUNS:-3}
now() { date +%s.%N; }
best() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }

printf '%-8s %10s %10s %12s %12s %8s\n' image "MiB" "zst MiB" "dd s" "WriteImage s" "ratio"
for kind in full sparse; do
	"$work/benchcmd" gen -kind "$kind" -size "$size" -out "$work/$kind.raw"
	zstd -q -3 -T0 --rm -o "$work/$kind.raw.zst" "$work/$kind.raw"
	zst_mib=$(( $(stat -c %s "$work/$kind.raw.zst") >> 20 ))

	# best of $runs for each, with a sync before every run so that one run's
	# writeback does not land on the next
	dd_s=""
	go_s=""
	for _ in $(seq "$runs"); do
		truncate -s "$size" "$work/dd.disk"
		sync
		t0=$(now)
		zstd -dc "$work/$kind.raw.zst" | dd of="$work/dd.disk" bs=4M conv=notrunc,fsync status=none
		t1=$(now)
		s=$(echo "$t1 - $t0" | bc -l)
		dd_s=$(best "$dd_s" "$s")
		rm -f "$work/dd.disk"

		truncate -s "$size" "$work/go.disk"
		sync
		read -r s _ < <("$work/benchcmd" write -image "$work/$kind.raw.zst" -compression zstd -disk "$work/go.disk" 2>/dev/null)
		go_s=$(best "$go_s" "$s")
		rm -f "$work/go.disk"
	done
	rm -f "$work/$kind.raw.zst"

	printf '%-8s %10d %10d %12.3f %12.3f %8.2f\n' "$kind" "$size_mib" "$zst_mib" "$dd_s" "$go_s" "$(echo "$go_s / $dd_s" | bc -l)"
done
echo "ratio = WriteImage time / (zstd -dc | dd conv=fsync) time; below 1 means WriteImage is faster"
