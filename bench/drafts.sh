#!/usr/bin/env bash
# The cost of each MoQT draft, side by side in one run: the same moq-bench scenario against the
# same relay build, publisher and subscribers at one draft per run, the drafts alternating
# ROUNDS times (default 3) so that the machine's noise falls on all alike. Prints each run's
# relay CPU per delivered GB, p50/p99 and loss, then the medians and each draft's ratio to
# draft-16's.
#
#   bench/drafts.sh                              # fan-out 1 → 50, 1200 B, 300/s, 8 s
#   ROUNDS=5 DRAFTS="16 22" bench/drafts.sh fanout --subscribers 100 --rate 300 --duration 10
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DRAFTS=${DRAFTS:-16 14 18 20 22}
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
    for draft in $DRAFTS; do
        bench/run.sh "$@" --draft "$draft" --json "$out/$draft-$round.json" >/dev/null 2>&1 ||
            { echo "bench/drafts.sh: draft-$draft round $round failed" >&2; exit 1; }
    done
done
python3 bench/side_by_side.py "$out" "$ROUNDS" $DRAFTS
