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
# and moq-bench aside before a change, rebuild, then compare.
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
        BIN="$out/$side" bench/run.sh "$@" --json "$out/$side-$round.json" >/dev/null 2>&1 ||
            { echo "bench/ab.sh: build $side round $round failed" >&2; exit 1; }
    done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for side in ("a", "b"):
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{side}-{r}.json"))
        cpu = d.get("relay_cpu_s") or 0
        gb = d["delivered_bytes"] / 1e9
        lat = d["latency_us"]
        rows.setdefault(side, []).append((cpu / gb if gb else float("nan"), lat["p50"], lat["p99"], d["lost"]))
print(f"{'build':<6} {'run':>3} {'relay CPU s/GB':>15} {'p50 µs':>8} {'p99 µs':>8} {'lost':>6}")
for side, rs in rows.items():
    for i, (c, p50, p99, lost) in enumerate(rs, 1):
        print(f"{side.upper():<6} {i:>3} {c:>15.2f} {str(p50):>8} {str(p99):>8} {str(lost):>6}")
med = {s: statistics.median(r[0] for r in rs) for s, rs in rows.items()}
p99 = {s: statistics.median(r[2] for r in rs) for s, rs in rows.items()}
print(f"median relay CPU s/GB: A {med['a']:.2f}, B {med['b']:.2f}; ratio B/A {med['b'] / med['a']:.3f}")
print(f"median p99 µs: A {p99['a']}, B {p99['b']}")
PY
