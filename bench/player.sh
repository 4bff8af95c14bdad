#!/usr/bin/env bash
# Live video to the screen, measured: the player test of tests/browser.rs (ffmpeg's test
# pattern stamped with the wall clock → moq-pub --fmp4 → relay(s) → moq-dev's <moq-watch> in
# headless Chromium, two viewers, the second 5 s after the first), built in release and run
# RUNS times (default 3). Prints, per round of the test (publisher draft → viewer draft, one
# relay or edge + origin), the medians over the runs of: each viewer's time to first frame;
# its glass-to-decoder latency at the live edge (wall clock at the decoder's output minus the
# frame's stamp, median of its last 150 frames); moq-pub's part of it (stamp to publication:
# encoder, pipe, fMP4 import, and ffmpeg's start-up, which -output_ts_offset cannot see: the
# stamps are the wall clock before ffmpeg started plus each frame's time); what follows
# publication (relays, network, the player's receive and decode: the glass-to-decoder
# latency less moq-pub's part, both in steady state); and each relay's added delay (p50).
#
#   bench/player.sh            # RUNS=5 bench/player.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo test --release -p moq-edge --test browser --no-run >/dev/null 2>&1
for run in $(seq 1 "$RUNS"); do
    cargo test --release -p moq-edge --test browser the_player_plays_a_broadcast_from_ffmpeg_through_the_relay -- --exact --nocapture >"$out/$run.log" 2>&1 ||
        { tail -40 "$out/$run.log" >&2; echo "bench/player.sh: run $run failed" >&2; exit 1; }
done
python3 - "$out" "$RUNS" <<'PY'
import json, statistics, sys
from collections import defaultdict
out, runs = sys.argv[1], int(sys.argv[2])
rows = defaultdict(lambda: defaultdict(list))
order = []
for run in range(1, runs + 1):
    for line in open(f"{out}/{run}.log"):
        if not line.startswith("player-figures "):
            continue
        f = json.loads(line[len("player-figures "):])
        key = f"{f['round']}: draft-{f['publisher']} → draft-{f['viewer']}"
        if key not in order:
            order.append(key)
        r = rows[key]
        for i, v in enumerate(f["viewers"]):
            r[f"ttff{i}"].append(v["ttff_ms"])
            r[f"age{i}"].append(v["age_median_ms"])
            if v["age_median_ms"] is not None and f["moq_pub_age_ms"] is not None:
                r[f"after{i}"].append(v["age_median_ms"] - f["moq_pub_age_ms"])
        r["pub"].append(f["moq_pub_age_ms"])
        for i, d in enumerate(f["relay_delay_p50_ms"]):
            r[f"relay{i}"].append(d)
med = lambda xs: statistics.median([x for x in xs if x is not None]) if any(x is not None for x in xs) else float("nan")
print(f"medians of {runs} runs (ms)")
print("| round | first frame, viewer at start | first frame, viewer 5 s in | stamp to decoder (start / 5 s in) | of which moq-pub | after moq-pub (start / 5 s in) | relay delay p50 |")
print("|---|---:|---:|---:|---:|---:|---:|")
for key in order:
    r = rows[key]
    relays = " + ".join(f"{med(r[k]):.1f}" for k in sorted(r) if k.startswith("relay"))
    print(f"| {key} | {med(r['ttff0']):.0f} | {med(r['ttff1']):.0f} | {med(r['age0']):.0f} / {med(r['age1']):.0f} | {med(r['pub']):.0f} | {med(r['after0']):.1f} / {med(r['after1']):.1f} | {relays} |")
PY
