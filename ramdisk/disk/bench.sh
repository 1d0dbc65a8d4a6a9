#!/usr/bin/env bash
# bench.sh: time disk.WriteImage against two peers on the same images in the
# same run, and print the ratios: `zstd -dc image | dd of=disk bs=4M
# conv=fsync` (writes every byte) and the same with conv=sparse (seeks over
# zero blocks; correct only because the bench's disk is a fresh sparse file:
# over a disk that held data it would leave that data where the image is
# zero, which WriteImage does not). Images: a full one (every block
# compressible data) and a mostly empty one (5% of blocks data).
# Needs zstd (apt-get install -y zstd) and about 2x SIZE of free disk space.
#
#   RUNS=5 PROFILE=DIR ramdisk/disk/bench.sh [SIZE_MIB]
#
# SIZE_MIB defaults to 1024; each figure is the best of RUNS (default 5: the
# bench machine is shared, so one run says little); with PROFILE, the last
# WriteImage run of each image leaves a CPU profile in DIR/<image>.prof
# (go tool pprof -top DIR/full.prof).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

size_mib=${1:-1024}
size=$((size_mib << 20))
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v zstd >/dev/null || { echo "bench.sh: zstd not found: apt-get install -y zstd" >&2; exit 1; }
profile=${PROFILE:-}
[ -z "$profile" ] || mkdir -p "$profile"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/benchcmd" ./ramdisk/disk/internal/benchcmd)

runs=${RUNS:-5}
now() { date +%s.%N; }
best() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }

# dd_run CONV IMAGE: seconds of zstd -dc IMAGE | dd conv=CONV onto a fresh sparse disk
dd_run() {
	truncate -s "$size" "$work/dd.disk"
	sync
	local t0 t1
	t0=$(now)
	zstd -dc "$2" | dd of="$work/dd.disk" bs=4M conv="$1" status=none
	t1=$(now)
	rm -f "$work/dd.disk"
	echo "$t1 - $t0" | bc -l
}

printf '%-7s %6s %7s %7s %11s %12s %6s %12s | %6s %7s %6s %8s\n' image MiB "zst MiB" "dd s" "dd-sparse s" "WriteImage s" "vs dd" "vs dd-sparse" \
	"wait s" "write s" "sync s" "sha256 s"
for kind in full sparse; do
	"$work/benchcmd" gen -kind "$kind" -size "$size" -out "$work/$kind.raw"
	zstd -q -3 -T0 --rm -o "$work/$kind.raw.zst" "$work/$kind.raw"
	zst_mib=$(( $(stat -c %s "$work/$kind.raw.zst") >> 20 ))

	# best of $runs for each, interleaved, with a sync before every run so
	# that one run's writeback does not land on the next
	dd_s="" sp_s="" go_s="" go_line=""
	for _ in $(seq "$runs"); do
		dd_s=$(best "$dd_s" "$(dd_run notrunc,fsync "$work/$kind.raw.zst")")
		sp_s=$(best "$sp_s" "$(dd_run sparse,notrunc,fsync "$work/$kind.raw.zst")")

		truncate -s "$size" "$work/go.disk"
		sync
		prof=()
		[ -z "$profile" ] || prof=(-cpuprofile "$profile/$kind.prof")
		line=$("$work/benchcmd" write -image "$work/$kind.raw.zst" -compression zstd -disk "$work/go.disk" "${prof[@]}" 2>/dev/null)
		read -r s _ <<<"$line"
		if [ "$(best "$go_s" "$s")" = "$s" ]; then go_s=$s go_line=$line; fi
		rm -f "$work/go.disk"
	done
	rm -f "$work/$kind.raw.zst"

	read -r _ _ wait_s write_s sync_s hash_s <<<"$go_line"
	printf '%-7s %6d %7d %7.3f %11.3f %12.3f %6.2f %12.2f | %6.3f %7.3f %6.3f %8.3f\n' "$kind" "$size_mib" "$zst_mib" "$dd_s" "$sp_s" "$go_s" \
		"$(echo "$go_s / $dd_s" | bc -l)" "$(echo "$go_s / $sp_s" | bc -l)" "$wait_s" "$write_s" "$sync_s" "$hash_s"
done
cat <<'TXT'
vs dd, vs dd-sparse = WriteImage time / peer time (below 1: WriteImage is faster; 0.20 is 5x faster).
Right of |, for the best WriteImage run: wait = the writer waiting for decompressed data (decompression,
with the stream's sha256 before it), write = in writes and zeroing, sync = in fdatasync (checkpoints
overlap the writes); sha256 = hashing the stream alone, which WriteImage does in-stream.
TXT
