#!/usr/bin/env bash
# deploy/cluster/run.sh: run the Procfile beside it on this machine - the
# Temporal services as separate processes on one PostgreSQL, and the control
# plane (two API, two worker processes) against them. Ctrl-C stops them all.
#
#   TEMPORAL_DATABASE_URL=postgres://temporal:pw@db:5432/temporal \
#   BC_DATABASE_URL=postgres://bc:pw@db:5432/better_compute \
#   deploy/cluster/run.sh
#
# Every variable of the Procfile may be set; the defaults are below. Logs go
# to $LOG_DIR/<name>.log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${TEMPORAL_DATABASE_URL:?the Temporal database, postgres://user:password@host:port/temporal}"
: "${BC_DATABASE_URL:?the control plane database, postgres://user:password@host:port/better_compute}"
export BC="${BC:-better-compute}" HOST="${HOST:-127.0.0.1}" HISTORY_SHARDS="${HISTORY_SHARDS:-16}"
export DATA_DIR="${DATA_DIR:-$PWD/.better-compute}" LOG_DIR="${LOG_DIR:-$PWD/cluster-logs}"
export FRONTEND_1_PORT="${FRONTEND_1_PORT:-7233}" FRONTEND_1_MEMBERSHIP_PORT="${FRONTEND_1_MEMBERSHIP_PORT:-6933}"
export FRONTEND_2_PORT="${FRONTEND_2_PORT:-7243}" FRONTEND_2_MEMBERSHIP_PORT="${FRONTEND_2_MEMBERSHIP_PORT:-6943}"
export HISTORY_1_PORT="${HISTORY_1_PORT:-7234}" HISTORY_1_MEMBERSHIP_PORT="${HISTORY_1_MEMBERSHIP_PORT:-6934}"
export HISTORY_2_PORT="${HISTORY_2_PORT:-7244}" HISTORY_2_MEMBERSHIP_PORT="${HISTORY_2_MEMBERSHIP_PORT:-6944}"
export MATCHING_1_PORT="${MATCHING_1_PORT:-7235}" MATCHING_1_MEMBERSHIP_PORT="${MATCHING_1_MEMBERSHIP_PORT:-6935}"
export MATCHING_2_PORT="${MATCHING_2_PORT:-7245}" MATCHING_2_MEMBERSHIP_PORT="${MATCHING_2_MEMBERSHIP_PORT:-6945}"
export WORKER_PORT="${WORKER_PORT:-7239}" WORKER_MEMBERSHIP_PORT="${WORKER_MEMBERSHIP_PORT:-6939}"
export API_1_PORT="${API_1_PORT:-7780}" AGENTS_1_PORT="${AGENTS_1_PORT:-7781}"
export API_2_PORT="${API_2_PORT:-7790}" AGENTS_2_PORT="${AGENTS_2_PORT:-7791}"
export TEMPORAL_ARGS="${TEMPORAL_ARGS:---database-url $TEMPORAL_DATABASE_URL --history-shards $HISTORY_SHARDS --frontend-address $HOST:$FRONTEND_1_PORT}"
export SERVE_ARGS="${SERVE_ARGS:---data-dir $DATA_DIR --database-url $BC_DATABASE_URL --temporal-address $HOST:$FRONTEND_1_PORT,$HOST:$FRONTEND_2_PORT --ui-listen off --metrics-listen off}"
mkdir -p "$LOG_DIR"

# The schema first (idempotent; a first start would do it too, but processes
# starting together then take turns), and the CA the API's agents listener needs.
set -f # the URLs may hold ? and *: no globbing of expanded words
$BC temporal setup-schema $TEMPORAL_ARGS
[ -e "$DATA_DIR/pki/ca.crt" ] || $BC pki init --data-dir "$DATA_DIR" --trust-domain "${TRUST_DOMAIN:-site.example.test}"

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait; }
trap stop EXIT INT TERM
start() { # start NAME: the Procfile's line NAME, in the background
  local cmd
  cmd="$(sed -n "s/^$1: //p" "$here/Procfile")"
  bash -c "set -f; exec $cmd" >>"$LOG_DIR/$1.log" 2>&1 &
  pids+=($!)
  echo "started $1 (pid $!), log $LOG_DIR/$1.log"
}
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null && return; sleep 0.2; done; echo "nothing on $HOST:$1" >&2; exit 1; }

for p in frontend-1 frontend-2 history-1 history-2 matching-1 matching-2 temporal-worker; do start "$p"; done
start api-1
wait_port "$API_1_PORT"
for p in api-2 worker-1 worker-2; do start "$p"; done
echo "API: http://$HOST:$API_1_PORT and http://$HOST:$API_2_PORT; agents join https://$HOST:$AGENTS_1_PORT; root token $DATA_DIR/root-token"
wait -n
echo "a process exited; stopping the rest" >&2
