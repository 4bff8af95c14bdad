#!/usr/bin/env bash
# The cost of WebTransport against raw QUIC, side by side in one run: the same moq-bench
# scenario against the same relay build, alternating transports ROUNDS times (default 3), so
# that the machine's noise falls on both alike. Prints each run's relay CPU per delivered GB,
# p50/p99 and loss, then the medians and the ratio WebTransport / QUIC.
#
#   bench/transports.sh                          # fan-out 1 → 50, 1200 B, 300/s, 8 s
#   ROUNDS=5 bench/transports.sh fanout --subscribers 100 --rate 300 --duration 10
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
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
    for transport in quic webtransport; do
        TRANSPORT=$transport bench/run.sh "$@" --json "$out/$transport-$round.json" >/dev/null 2>&1 ||
            { echo "bench/transports.sh: $transport round $round failed" >&2; exit 1; }
    done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for t in ("quic", "webtransport"):
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/{t}-{r}.json"))
        cpu = d.get("relay_cpu_s") or 0
        gb = d["delivered_bytes"] / 1e9
        lat = d["latency_us"]
        rows.setdefault(t, []).append((cpu / gb if gb else float("nan"), lat["p50"], lat["p99"], d["lost"]))
print(f"{'transport':<13} {'run':>3} {'relay CPU s/GB':>15} {'p50 µs':>8} {'p99 µs':>8} {'lost':>6}")
for t, rs in rows.items():
    for i, (c, p50, p99, lost) in enumerate(rs, 1):
        print(f"{t:<13} {i:>3} {c:>15.2f} {str(p50):>8} {str(p99):>8} {str(lost):>6}")
med = {t: statistics.median(r[0] for r in rs) for t, rs in rows.items()}
print(f"median relay CPU s/GB: quic {med['quic']:.2f}, webtransport {med['webtransport']:.2f}; "
      f"ratio webtransport/quic {med['webtransport'] / med['quic']:.3f}")
PY
