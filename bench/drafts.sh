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
DRAFTS=${DRAFTS:-16 18 20 22}
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
python3 - "$out" "$ROUNDS" $DRAFTS <<'PY'
import json, statistics, sys
out, rounds, drafts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for d in drafts:
    for r in range(1, rounds + 1):
        j = json.load(open(f"{out}/{d}-{r}.json"))
        cpu = j.get("relay_cpu_s") or 0
        gb = j["delivered_bytes"] / 1e9
        lat = j["latency_us"]
        rows.setdefault(d, []).append((cpu / gb if gb else float("nan"), lat["p50"], lat["p99"], j["lost"]))
print(f"{'draft':<6} {'run':>3} {'relay CPU s/GB':>15} {'p50 µs':>8} {'p99 µs':>8} {'lost':>6}")
for d, rs in rows.items():
    for i, (c, p50, p99, lost) in enumerate(rs, 1):
        print(f"{d:<6} {i:>3} {c:>15.2f} {str(p50):>8} {str(p99):>8} {str(lost):>6}")
med = {d: statistics.median(r[0] for r in rs) for d, rs in rows.items()}
base = med[drafts[0]]
print("median relay CPU s/GB: " + ", ".join(f"draft-{d} {m:.2f} ({m / base:.3f})" for d, m in med.items()))
PY
