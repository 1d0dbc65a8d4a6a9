#!/usr/bin/env bash
# fleet.sh: run BenchmarkFleet (demo/bench_test.go) and print its table: N
# emulated machines through one loop at once (deploy + undeploy; each machine
# enrolled, and looped once, before the timer) on the embedded default, then
# bare Temporal on the same server, namespace, mTLS identities, codec and
# search attributes, running the same activities with the same options as
# no-ops (bench/bare).
#
#   ITERS=3 bench/fleet.sh [SIZES]   (default SIZES 1,5,20; ITERS loops per size, and at the small
#                                     sizes more, up to MIN_LOOPS (default 50) machine loops a side)
#   ITERS=1 bench/fleet.sh 200,1000  (the large fleets: about 5 and 30 minutes a loop on 2 cores)
#   TRACE=1 bench/fleet.sh 20        (tracing on: every span exported over OTLP/HTTP to an in-process receiver)
#   PROFILE=/abs/dir bench/fleet.sh 200 (CPU profiles of each timed loop: dir/ours-N=200.<i>.pprof, dir/bare-N=200.<i>.pprof)
#   CLUSTER=1,20 bench/fleet.sh 1,20 (also on a Temporal cluster on PostgreSQL, deploy/cluster/Procfile's processes,
#                                     at these sizes, each one of SIZES: loops/s against the embedded default's)
#
# About two minutes on 2 cores with the defaults. Needs the Postgres binaries
# the control plane's embedded default uses.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3

sizes=${1:-1,5,20}
iters=${ITERS:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
# The whole output stays in $out when the run fails (an hour at 1,000
# machines): the lines shown are only the results and the failures' names.
out=$(mktemp /tmp/fleet.XXXXXX.log)
failed() {
	echo "bench/fleet.sh: the benchmark failed; its whole output is in $out" >&2
	exit 1
}

(cd "$repo" && go test -tags fakehw -run '^$' -bench '^BenchmarkFleet$' -benchtime "${iters}x" -timeout "${TIMEOUT:-4h}" \
	./demo -args -fleet="$sizes" -fleet-min-loops="${MIN_LOOPS:-50}" ${TRACE:+-fleet-trace} ${CLUSTER:+-fleet-cluster="$CLUSTER"} ${PROFILE:+-fleet-cpuprofile="$PROFILE"}) | tee "$out" | grep -E '^(Benchmark|PASS|FAIL|ok|---)' >&2 || failed
grep -q '^ok' "$out" || failed

# A result line is: name iterations ns/op then value unit pairs.
awk '
# Fleet/N=n holds ours'"'"'s metrics and, with a bare- prefix, bare'"'"'s; Fleet/cluster/N=n the cluster'"'"'s.
/^BenchmarkFleet\// {
	split($1, p, "/"); who = (p[2] ~ /^N=/) ? "ours" : p[2]; n = (who == "ours") ? p[2] : p[3]
	sub(/^N=/, "", n); sub(/-[0-9]+$/, "", n)
	for (i = 3; i + 1 <= NF; i += 2) {
		u = $(i + 1); w = who
		if (u ~ /^bare-/) { w = "bare"; u = substr(u, 6) }
		v[w, n, u] = $i
	}
	if (!(n in seen)) { seen[n] = 1; order[++count] = n }
}
END {
	printf "%4s | %8s %8s %9s %15s | %8s %7s | %7s %7s | %5s %5s | %7s %7s %7s | %6s %6s %6s | %6s %6s %9s %6s %6s %6s\n", "N", "loops/s", "bare", "ours/bare", "pairs",
		"cluster", "cl/ours", "acts/s", "bare", "acts", "local", "wall s", "p50", "p99", "RSS", "pg", "rack", "cpu s", "bare", "ours/bare", "rack", "pg", "all"
	for (i = 1; i <= count; i++) {
		n = order[i]
		cl = (("cluster", n, "loops/s") in v) ? sprintf("%8.3f %7.2f", v["cluster", n, "loops/s"], v["cluster", n, "cluster/ours"]) : sprintf("%8s %7s", "-", "-")
		pairs = sprintf("%.2f (%.2f-%.2f)", v["ours", n, "ours/bare-median"], v["ours", n, "ours/bare-min"], v["ours", n, "ours/bare-max"])
		printf "%4s | %8.3f %8.3f %9.2f %15s | %s | %7.1f %7.1f | %5d %5d | %7.2f %7.2f %7.2f | %6.0f %6.0f %6.0f | %6.2f %6.2f %9.2f %6.2f %6.3f %6.2f\n", n,
			v["ours", n, "loops/s"], v["bare", n, "loops/s"], v["ours", n, "ours/bare"], pairs, cl,
			v["ours", n, "acts/s"], v["bare", n, "acts/s"], v["ours", n, "acts/loop"], v["ours", n, "local/loop"],
			v["ours", n, "s-wall/loop"], v["ours", n, "s-p50/loop"], v["ours", n, "s-p99/loop"],
			v["ours", n, "MiB-peak-RSS"], v["ours", n, "MiB-pg-peak-RSS"], v["ours", n, "MiB-rack-peak-RSS"],
			v["ours", n, "cpu-s/loop"], v["bare", n, "cpu-s/loop"], v["ours", n, "cpu-ours/bare"], v["ours", n, "cpu-s-rack/loop"],
			v["ours", n, "cpu-s-pg/loop"], v["ours", n, "cpu-all-ours/bare"]
	}
	print ""
	printf "%4s | %41s | %41s\n", "", "ours: s a loop", "bare: s a loop"
	printf "%4s | %6s %6s %6s %6s %6s %6s | %6s %6s %6s %6s %6s %6s\n", "N", "wall", "in-act", "a-wait", "in-wft", "w-wait", "1st-w",
		"wall", "in-act", "a-wait", "in-wft", "w-wait", "1st-w"
	for (i = 1; i <= count; i++) {
		n = order[i]
		printf "%4s | %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f | %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f\n", n,
			v["ours", n, "s-wall/loop"], v["ours", n, "s-in-acts/loop"], v["ours", n, "s-act-wait/loop"], v["ours", n, "s-in-tasks/loop"], v["ours", n, "s-task-wait/loop"], v["ours", n, "s-first-wait/loop"],
			v["bare", n, "s-wall/loop"], v["bare", n, "s-in-acts/loop"], v["bare", n, "s-act-wait/loop"], v["bare", n, "s-in-tasks/loop"], v["bare", n, "s-task-wait/loop"], v["bare", n, "s-first-wait/loop"]
	}
	print ""
	print "loop     deploy + undeploy (wipe quick) of every machine at once, after a one-time enroll and one warm-up loop;"
	print "         ours'"'"'s loops and bare'"'"'s timed in turn (which goes first alternating), so both see the same machine"
	print "bare     one workflow per workflow of our loop on the same server (mTLS, authorizer, codec, search attributes), the"
	print "         same local, control-plane-queue and site-queue activities with our options (timeouts, heartbeat timeouts,"
	print "         retry policies) read from our history; each a no-op, heartbeating once where ours have a heartbeat timeout"
	print "acts     activities per loop (local + regular), read from our history; local: of which local activities"
	print "wall s   one machine loop, its workflows from start to close (mean, p50, p99 over the machines'"'"' loops)."
	print "         Below, where a machine'"'"'s loop went, ours'"'"'s and bare'"'"'s (mean, from history): in-act regular activities"
	print "         running, a-wait waiting for a worker; in-wft workflow tasks running (workflow code, local activities),"
	print "         w-wait waiting for a worker, of which 1st-w the first task of each workflow (on the task queue, for any poller);"
	print "         the rest is between them"
	print "RSS      peak MiB of the test process in ours'"'"'s loops (control plane, embedded Temporal, site agent); pg: Postgres tree, sampled;"
	print "         rack: the emulated rack'"'"'s process (BMCs, ramdisks), sampled; none for bare, which runs in the same"
	print "         process beside our idle control plane"
	print "cpu s    CPU seconds of the test process a loop (user + system; Postgres and the rack not counted): less noisy"
	print "         than wall time on a shared machine; bare'"'"'s process also holds our idle control plane; rack: the"
	print "         rack process'"'"'s CPU seconds a loop (the machines'"'"' work, which bare has none of); pg: Postgres'"'"'s;"
	print "         all: every process'"'"'s CPU a loop, ours over bare (with the rack'"'"'s and Postgres'"'"'s, idle in bare'"'"'s"
	print "         loops): where the test process, Postgres and the rack share the cores, the time ratio follows this one"
	print "ours/bare  our time per loop over bare Temporal'"'"'s at the same N: 1.00 is no overhead; pairs: each pair of"
	print "         loops'"'"' ratio (ours'"'"'s i over bare'"'"'s i), median (min-max)"
	print "cluster  the same loop through deploy/cluster/Procfile'"'"'s processes (Temporal frontend, history, matching x2,"
	print "         its worker service, 4 history shards, on PostgreSQL; serve --only api x2, --only worker x2); cl/ours:"
	print "         its time per loop over the embedded default'"'"'s above, in the same run (1.00: as fast)"
	clustered = 0
	for (i = 1; i <= count; i++) if (("cluster", order[i], "loops/s") in v) clustered++
	if (!clustered) exit
	print ""
	printf "%4s | %8s %7s | %7s %7s %7s %7s | %6s %6s %8s | %8s %7s %8s %7s %6s %6s %6s %6s | %7s\n", "N", "cluster", "cl/ours",
		"wall s", "p50", "p99", "in-acts", "cpu s", "ours", "cpu/ours", "frontend", "history", "matching", "tworker", "api", "worker", "pg", "bench", "pg-xact"
	for (i = 1; i <= count; i++) {
		n = order[i]
		if (!(("cluster", n, "loops/s") in v)) continue
		printf "%4s | %8.3f %7.2f | %7.2f %7.2f %7.2f %7.2f | %6.2f %6.2f %8.2f | %8.2f %7.2f %8.2f %7.2f %6.2f %6.2f %6.2f %6.2f | %7.0f\n", n,
			v["cluster", n, "loops/s"], v["cluster", n, "cluster/ours"],
			v["cluster", n, "s-wall/loop"], v["cluster", n, "s-p50/loop"], v["cluster", n, "s-p99/loop"], v["cluster", n, "s-in-acts/loop"],
			v["cluster", n, "cpu-s/loop"], v["ours", n, "cpu-s/loop"] + v["ours", n, "cpu-s-pg/loop"], v["cluster", n, "cpu-cluster/ours"],
			v["cluster", n, "cpu-s-frontend/loop"], v["cluster", n, "cpu-s-history/loop"],
			v["cluster", n, "cpu-s-matching/loop"], v["cluster", n, "cpu-s-tworker/loop"], v["cluster", n, "cpu-s-api/loop"],
			v["cluster", n, "cpu-s-worker/loop"], v["cluster", n, "cpu-s-pg/loop"], v["cluster", n, "cpu-s-bench/loop"], v["cluster", n, "pg-xacts/loop"]
	}
	print ""
	print "cpu s    CPU seconds a loop of every process of the cluster run, and by kind: Temporal'"'"'s frontend, history,"
	print "         matching (both of each) and worker service (tworker), serve'"'"'s api and worker (both of each), PostgreSQL"
	print "         (Temporal'"'"'s persistence and visibility, the control plane'"'"'s database), and the bench process (site agent,"
	print "         emulated rack, image server, API and Temporal clients); ours: the embedded default'"'"'s, its Postgres"
	print "         included; cpu/ours: the ratio, steadier than cl/ours when other work shares the machine"
	print "pg-xact  PostgreSQL transactions a loop, every database"
}' "$out"
# Where each side's activities ran longest (demo/bench_test.go, byType).
grep -h 'activities running' "$out" | sed -e 's/^ *[a-z_]*\.go:[0-9]*: //' -e 's/^BenchmarkFleet\///' || true
rm -f "$out"
