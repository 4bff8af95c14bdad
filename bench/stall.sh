#!/usr/bin/env bash
# A stalled subscriber, measured side by side: two relays at once on the same CPUs, each fed by
# its own moq-bench (1 publisher → SUBSCRIBERS subscriber connections, RATE objects/s of 1200 B),
# and on one of the two one subscriber stops reading its streams after the warm-up (`--stall 1`:
# it grants no more flow control while QUIC still acknowledges). The machine's noise falls on
# both at the same moment; which side stalls alternates by round. Prints, per round and as
# medians, the other subscribers' p50/p99 on each side, their ratio (stall / no stall), each
# relay's CPU seconds and peak RSS, and what the stalled side's relay shed.
#
#   bench/stall.sh                         # 4 rounds, 50 subscribers each, 300/s, 70 s
#   ROUNDS=6 DURATION=90 bench/stall.sh
#
# 70 s is enough for the stalled connection's 16 MiB flow-control window (moq-bench's) to fill at
# 0.36 MB/s and for the relay to shed its streams. BIN=dir uses prebuilt binaries (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-4}
SUBSCRIBERS=${SUBSCRIBERS:-50}
RATE=${RATE:-300}
DURATION=${DURATION:-70}
if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    BIN=target/release
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
side() { # side name port metrics stall round
    PORT=$2 METRICS=$3 BIN=$BIN bench/run.sh fanout --subscribers "$SUBSCRIBERS" --object-size 1200 \
        --rate "$RATE" --duration "$DURATION" --warmup 2 --stall "$4" --quiet \
        --json "$out/$5-$1.json" >"$out/$5-$1.txt" 2>&1
}
for round in $(seq 1 "$ROUNDS"); do
    if ((round % 2)); then sa=0 sb=1; else sa=1 sb=0; fi
    side a 4478 9478 $sa "$round" &
    a=$!
    side b 4479 9479 $sb "$round" &
    b=$!
    wait $a || { echo "bench/stall.sh: side a of round $round failed; see its output:" >&2; cat "$out/$round-a.txt" >&2; exit 1; }
    wait $b || { echo "bench/stall.sh: side b of round $round failed; see its output:" >&2; cat "$out/$round-b.txt" >&2; exit 1; }
    # The stalled side's relay: its stream resets by reason (the metrics dump after the run).
    stalled=$( ((sa)) && echo a || echo b)
    { grep -hE '^moq_edge_resets_total\{core="all"' "$out/$round-$stalled.txt" || true; } | tail -n 3 |
        sed -E 's/.*reason="([a-z_]+)"\} /\1 /' | tr '\n' ' ' >"$out/$round-shed"
    sleep 2
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
ratios, cpu = [], []
print("round  side  stall  others' p50   p99 (µs)   relay CPU s  peak RSS MiB  lost")
for r in range(1, rounds + 1):
    by = {}
    for side in "ab":
        d = json.load(open(f"{out}/{r}-{side}.json"))
        by[d["stalled"]] = d
        lat = d["latency_us"]
        print(f"{r:>5}  {side:>4}  {d['stalled']:>5}  {lat['p50']:>12}  {lat['p99']:>9}  "
              f"{d['relay_cpu_s']:>11.2f}  {d['relay_rss_max_bytes'] / 2**20:>12.1f}  {d['lost']:>4}")
    ratios.append(by[1]["latency_us"]["p99"] / by[0]["latency_us"]["p99"])
    cpu.append(by[1]["relay_cpu_s"] / by[0]["relay_cpu_s"])
    print(f"       stalled side's relay, streams reset: {open(f'{out}/{r}-shed').read().strip() or '(no metrics)'}")
print("others' p99, stall / no stall, by round:", " ".join(f"{x:.3f}" for x in ratios),
      f"median {statistics.median(ratios):.3f}")
print("relay CPU,   stall / no stall, by round:", " ".join(f"{x:.3f}" for x in cpu),
      f"median {statistics.median(cpu):.3f}")
PY
