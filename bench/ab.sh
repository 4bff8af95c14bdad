#!/usr/bin/env bash
# Two builds of the relay side by side in one run: the same moq-bench scenario against each,
# alternating ROUNDS times (default 3) so that the machine's noise falls on both alike. Prints
# each run's relay CPU per delivered GB, p50/p99 and loss, then the medians and the ratio B / A.
# Both builds run with the moq-bench of B.
#
#   bench/ab.sh /path/to/old-bin target/release                 # fan-out 1 → 100, 1200 B, 300/s
#   ROUNDS=5 bench/ab.sh old new fanout --subscribers 50 --rate 300 --duration 8
#
# A directory holds a moq-edge binary (and, for B, moq-bench): e.g. copy target/release/moq-edge
# and moq-bench aside before a change, rebuild, then compare. ARGS_A and ARGS_B add relay flags
# to one side (RELAY_ARGS, to both): one build with two settings is `bench/ab.sh D D` with them.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 2)); then
    echo "usage: bench/ab.sh DIR_A DIR_B [scenario args]" >&2
    exit 2
fi
A=$1 B=$2
shift 2
ROUNDS=${ROUNDS:-3}
if (($# == 0)); then
    set -- fanout --subscribers 100 --object-size 1200 --rate 300 --duration 10 --warmup 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/a" "$out/b"
ln -s "$(realpath "$A")/moq-edge" "$out/a/moq-edge"
ln -s "$(realpath "$B")/moq-bench" "$out/a/moq-bench"
ln -s "$(realpath "$B")/moq-edge" "$out/b/moq-edge"
ln -s "$(realpath "$B")/moq-bench" "$out/b/moq-bench"
for round in $(seq 1 "$ROUNDS"); do
    for side in a b; do
        args=ARGS_${side^^}
        BIN="$out/$side" RELAY_ARGS="${RELAY_ARGS:-} ${!args:-}" bench/run.sh "$@" --json "$out/${side^^}-$round.json" >/dev/null 2>&1 ||
            { echo "bench/ab.sh: build $side round $round failed" >&2; exit 1; }
    done
done
python3 bench/side_by_side.py "$out" "$ROUNDS" A B
