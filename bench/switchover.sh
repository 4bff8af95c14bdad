#!/usr/bin/env bash
# An origin switchover under load. Four relays on the loopback, one core each: the old origin,
# its successor, edge A (the publisher's) and edge B (the subscribers'), both edges with the old
# origin as their upstream. moq-bench publishes on A and subscribes on B; SWITCH_AT seconds in,
# the old origin gets SIGTERM with `--goaway-uri` naming its successor and a 30 s drain. The
# edges move their tracks to the successor (make before break), so moq-bench's integrity line
# should read lost 0, duplicated 0, reordered 0, streams reset 0; the script also prints how
# long the old origin took to exit (it exits once both edges have moved away).
#
#   bench/switchover.sh                          # the default load below
#   bench/switchover.sh --subscribers 20 --rate 100
#
# Arguments are moq-bench fanout's (--relay and --publish-relay are added here). BIN=dir uses
# prebuilt binaries from dir instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."

SWITCH_AT=${SWITCH_AT:-6}
BASE=${BASE_PORT:-4571}
OLD=$BASE NEW=$((BASE + 1)) A=$((BASE + 2)) B=$((BASE + 3))
if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    BIN=target/release
fi
if (($# == 0)); then
    set -- --subscribers 100 --object-size 1200 --rate 300 --group-size 30 --duration 10 --warmup 2
fi

pids=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
relay() {
    local port=$1
    shift
    "$BIN/moq-edge" --listen "127.0.0.1:$port" --cores 1 --metrics "127.0.0.1:$((port + 1000))" "$@" \
        >"/tmp/moq-switchover-$port.log" 2>&1 &
    pids+=($!)
}
relay "$NEW" --goaway-timeout-ms 0
relay "$OLD" --goaway-timeout-ms 30000 --goaway-uri "moqt://127.0.0.1:$NEW"
old_pid=${pids[-1]}
relay "$A" --upstream "moqt://127.0.0.1:$OLD" --upstream-insecure true
relay "$B" --upstream "moqt://127.0.0.1:$OLD" --upstream-insecure true
sleep 2

"$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$B" --publish-relay "moqt://127.0.0.1:$A" --quiet "$@" &
bench=$!
sleep "$SWITCH_AT"
start=$(date +%s%N)
kill -TERM "$old_pid"
while kill -0 "$old_pid" 2>/dev/null; do sleep 0.05; done
end=$(date +%s%N)
echo "switchover: the old origin exited $(((end - start) / 1000000)) ms after SIGTERM"
status=0
wait "$bench" || status=$?
moves=$(curl -s "127.0.0.1:$((B + 1000))/metrics" | grep '^moq_edge_upstream_moves_total{core="all"}' || true)
echo "switchover: edge B ${moves:-moq_edge_upstream_moves_total unknown}"
exit "$status"
