#!/usr/bin/env bash
# bench.sh: time disk.WriteImage against two peers on the same images in the
# same run, and print the ratios: `zstd -dc image | dd of=disk bs=4M
# conv=fsync` (writes every byte) and the same with conv=sparse (seeks over
# zero blocks; correct only because the bench's disk is a fresh sparse file:
# over a disk that held data it would leave that data where the image is
# zero, which WriteImage does not). Images: a full one (every block
# compressible data) and a mostly empty one (5% of blocks data), compressed
# by the zstd tool. All three write to a fresh sparse file in the same
# directory (one file system), synced before each run.
# Then BenchmarkWriteImageStages splits WriteImage's time on the same images
# (hash alone, decompression alone, the writer onto a disk that drops
# everything, the writer with the hashing skipped).
# Needs zstd (apt-get install -y zstd) and about 2x SIZE of free disk space.
#
#   RUNS=5 STAGE_RUNS=3 PROFILE=DIR ramdisk/disk/bench.sh [SIZE_MIB]
#
# SIZE_MIB defaults to 1024. Each peer runs RUNS times (default 5),
# interleaved: the bench machine is shared, so each figure is the median of
# the runs with their range, and each ratio is taken within one round (the
# three runs back to back) before its median and range. With PROFILE, the
# last WriteImage run of each image leaves a CPU profile in DIR/<image>.prof
# (go tool pprof -top DIR/full.prof).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

size_mib=${1:-1024}
size=$((size_mib << 20))
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v zstd >/dev/null || { echo "bench.sh: zstd not found: apt-get install -y zstd" >&2; exit 1; }
profile=${PROFILE:-}
[ -z "$profile" ] || mkdir -p "$profile"
runs=${RUNS:-5}
stage_runs=${STAGE_RUNS:-3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/benchcmd" ./ramdisk/disk/internal/benchcmd &&
	go test -c -o "$work/disk.test" ./ramdisk/disk)

now() { date +%s.%N; }
# summary: "median (min-max)" of the numbers on stdin, with format $1
summary() { sort -g | awk -v f="$1" '{v[NR]=$1} END {m = NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf f " (" f "-" f ")", m, v[1], v[NR]}'; }
div() { echo "$1 / $2" | bc -l; }

# dd_run CONV IMAGE: "seconds cpu-seconds" of zstd -dc IMAGE | dd conv=CONV
# onto a fresh sparse disk (CPU: user and system of zstd and dd)
dd_run() {
	truncate -s "$size" "$work/dd.disk"
	sync
	local TIMEFORMAT='%R %U %S' r u s
	read -r r u s < <({ time (zstd -dc "$2" | dd of="$work/dd.disk" bs=4M conv="$1" status=none); } 2>&1)
	rm -f "$work/dd.disk"
	echo "$r $(echo "$u + $s" | bc -l)"
}

# go_run IMAGE [benchcmd flags]: benchcmd write's line, "seconds bytes wait write sync sha256"
go_run() {
	truncate -s "$size" "$work/go.disk"
	sync
	"$work/benchcmd" write -image "$1" -compression zstd -disk "$work/go.disk" "${@:2}"
	rm -f "$work/go.disk"
}

results=$work/results
stages=$work/stages
for kind in full sparse; do
	"$work/benchcmd" gen -kind "$kind" -size "$size" -out "$work/$kind.raw"
	zstd -q -3 -T0 --rm -o "$work/$kind.raw.zst" "$work/$kind.raw"
	zst_mib=$(( $(stat -c %s "$work/$kind.raw.zst") >> 20 ))
	: >"$work/rounds"
	for i in $(seq "$runs"); do
		read -r dd_s dd_cpu < <(dd_run notrunc,fsync "$work/$kind.raw.zst")
		read -r sp_s sp_cpu < <(dd_run sparse,notrunc,fsync "$work/$kind.raw.zst")
		prof=()
		[ -z "$profile" ] || [ "$i" != "$runs" ] || prof=(-cpuprofile "$profile/$kind.prof")
		read -r go_s _ wait_s write_s sync_s hash_s go_cpu < <(go_run "$work/$kind.raw.zst" "${prof[@]}")
		echo "$dd_s $sp_s $go_s $(div "$go_s" "$dd_s") $(div "$go_s" "$sp_s") $wait_s $write_s $sync_s $hash_s" \
			"$dd_cpu $sp_cpu $go_cpu $(div "$go_cpu" "$dd_cpu") $(div "$go_cpu" "$sp_cpu")" >>"$work/rounds"
	done
	col() { cut -d' ' -f"$1" "$work/rounds" | summary "$2"; }
	printf '%-7s %5s %4s | %-23s | %-23s | %-23s | %-17s | %-17s | %s / %s / %s\n' "$kind" "$size_mib" "$zst_mib" \
		"$(col 1 %.3f)" "$(col 2 %.3f)" "$(col 3 %.3f)" "$(col 4 %.2f)" "$(col 5 %.2f)" \
		"$(col 6 %.3f)" "$(col 7 %.3f)" "$(col 8 %.3f)" >>"$results"
	printf '%-7s %5s %4s | %-23s | %-23s | %-23s | %-17s | %-17s\n' "$kind" "$size_mib" "$zst_mib" \
		"$(col 10 %.3f)" "$(col 11 %.3f)" "$(col 12 %.3f)" "$(col 13 %.2f)" "$(col 14 %.2f)" >>"$work/cpu"

	DISK_BENCH_IMAGE=$work/$kind.raw.zst DISK_BENCH_DIR=$work "$work/disk.test" -test.run '^$' \
		-test.bench 'BenchmarkWriteImageStages' -test.benchtime "${stage_runs}x" |
		awk -v k="$kind" '$1 ~ /^BenchmarkWriteImageStages\// {split($1, p, "/"); sub(/-[0-9]+$/, "", p[3]); t[p[3]] = $3 / 1e9}
			END {printf "%-7s %8.3f %10.3f %10.3f %8.3f %8.3f %6.3f\n", k, t["hash"], t["decompress"], t["hash+decompress"], t["devnull"], t["nohash"], t["all"]}' >>"$stages"
	rm -f "$work/$kind.raw.zst"
done

echo "seconds and ratios: median (min-max) of $runs rounds; a ratio below 1 is WriteImage faster (0.20: 5x faster)"
printf '%-7s %5s %4s | %-23s | %-23s | %-23s | %-17s | %-17s | %s\n' image MiB zst "zstd|dd fsync s" "zstd|dd sparse s" "WriteImage s" "vs dd" "vs dd-sparse" \
	"WriteImage's wait / write / sync s"
cat "$results"
cat <<'TXT'
wait = the writer waiting for decompressed data (decompression, with the stream's sha256 before it);
write = in writes and zeroing; sync = in fdatasync (checkpoints overlap the writes).
TXT
echo
echo "CPU seconds (user + system; zstd and dd together), the same rounds: steadier than wall time on a shared machine"
printf '%-7s %5s %4s | %-23s | %-23s | %-23s | %-17s | %-17s\n' image MiB zst "zstd|dd fsync cpu" "zstd|dd sparse cpu" "WriteImage cpu" "vs dd" "vs dd-sparse"
cat "$work/cpu"
echo
echo "where WriteImage's time goes (BenchmarkWriteImageStages, seconds per op, mean of $stage_runs):"
printf '%-7s %8s %10s %10s %8s %8s %6s\n' image sha256 decompress "sha+decomp" "devnull" "nohash" "all"
cat "$stages"
cat <<'TXT'
sha256, decompress = each alone; devnull = the whole writer (hash, decompress, zero checks) onto a disk
that keeps nothing; nohash = onto the file with the hashing skipped; all = WriteImage onto the file.
TXT
