#!/usr/bin/env bash
# netboot.sh: proxy DHCP under load. perfdhcp (Debian's kea-admin) plays PXE
# firmware (options 60, 93, 97; 64 machines, each with a boot entry) in a
# network namespace and sends DISCOVERs to our proxy (siteagent/pxe), then to
# dnsmasq in proxy mode on the same address with the same machines, in the
# same run; DISCOVER → OFFER on port 67 only (perfdhcp -i), which both answer
# alike (dnsmasq names the boot file only in its port-4011 ACK, so whole PXE
# exchanges are not comparable). Neither logs per answer.
#
#   ITERS=1 bench/netboot.sh
#
# Needs root (namespaces) and ./run's test packages; about 25 s per iteration.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

iters=${ITERS:-1}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

(cd "$repo" && go test -run '^$' -bench '^BenchmarkProxyDHCP$' -benchtime "${iters}x" -timeout 10m ./siteagent/pxe) |
	tee "$out" | grep -E '^(Benchmark|PASS|FAIL|ok|---)|offers \(' >&2

awk '
/^BenchmarkProxyDHCP/ { for (i = 3; i + 1 <= NF; i += 2) v[$(i + 1)] = $i }
END {
	printf "%-8s | %9s %6s | %7s %7s\n", "", "offers/s", "drop%", "p50 ms", "p99 ms"
	split("ours dnsmasq", who, " ")
	for (k = 1; k <= 2; k++) {
		w = who[k]
		printf "%-8s | %9.0f %6.1f | %7.3f %7.3f\n", w, v[w "-offers/s"], v[w "-drop%"], v[w "-p50-ms"], v[w "-p99-ms"]
	}
	printf "%-8s | %9.2f %6s | %7.2f %7.2f\n", "ours/dnsmasq", v["offers-ours/dnsmasq"], "", v["p50-ours/dnsmasq"], v["p99-ours/dnsmasq"]
	print ""
	print "offers/s  OFFERs received per second while perfdhcp offers 20000 DISCOVERs/s for 5 s (2 cores shared by both sides)"
	print "p50/p99   DISCOVER to OFFER on the client wire at 500 DISCOVERs/s for 5 s (perfdhcp -x t, one thread)"
	print "goal      offers at least dnsmasq'"'"'s (ratio >= 1), p99 under 2 ms"
}' "$out"
grep -q '^ok' "$out"
