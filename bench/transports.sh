#!/usr/bin/env bash
# The cost of WebTransport and of QMux over a WebSocket (plain and TLS) against raw QUIC, side
# by side in one run: the same moq-bench scenario against the same relay build, alternating
# transports ROUNDS times (default 3), so that the machine's noise falls on all alike. Prints
# each run's relay CPU per delivered GB, p50/p99 and loss, then the medians and each one's
# ratio to QUIC. TRANSPORTS="quic websocket" runs a subset.
#
#   bench/transports.sh                          # fan-out 1 → 50, 1200 B, 300/s, 8 s
#   ROUNDS=5 bench/transports.sh fanout --subscribers 100 --rate 300 --duration 10
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
TRANSPORTS=${TRANSPORTS:-quic webtransport websocket websocket-tls}
if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    export BIN=target/release
fi
if (($# == 0)); then
    set -- fanout --subscribers 50 --object-size 1200 --rate 300 --duration 8 --warmup 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq 1 "$ROUNDS"); do
    for transport in $TRANSPORTS; do
        TRANSPORT=$transport bench/run.sh "$@" --json "$out/$transport-$round.json" >/dev/null 2>&1 ||
            { echo "bench/transports.sh: $transport round $round failed" >&2; exit 1; }
    done
done
# shellcheck disable=SC2086 # a list of labels
python3 bench/side_by_side.py "$out" "$ROUNDS" $TRANSPORTS
