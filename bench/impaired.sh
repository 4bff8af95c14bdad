#!/usr/bin/env bash
# Impaired networks (bench/impair's moq-impair between viewers and the relay), each scenario
# with each congestion control the relay offers, one table: per group of viewers, objects
# delivered (% of those published while it watched), lost, reordered, streams reset,
# publish→receive latency p50 / p99 / p99.9, objects later than the relay's 2 s freshness
# budget, the relay's CPU per delivered GB and its largest RSS.
#
#   bench/impaired.sh                       # every scenario, cubic, bbr2 and reno
#   CCS="cubic bbr2" SCENARIOS="viewers" bench/impaired.sh
#
# Scenarios (moq-bench fan-out of 1200-byte objects at RATE per second, default 100, groups
# of 30, DURATION s measured after WARMUP s):
#   viewers  40 viewers on clean loopback beside 10 whose link (both ways) loses 3 % and
#            delays 40 ms (80 ms RTT), each group with its own publisher on the relay; and the
#            same 40 beside 10 through the proxy unimpaired, so that the clean viewers' p99
#            with and without impaired ones beside them are side by side.
#   outage   10 viewers whose link drops everything for 3 s (from 2 s after the warm-up
#            begins) and comes back: whether the sessions survive and what they miss.
#   thin     10 viewers whose link toward them carries half the stream's bitrate (a rate cap
#            with a 64 KB queue): what the relay drops, and whether they keep the live edge;
#            once in the publisher's group order (ascending), once asking for the newest
#            group first (descending).
#   tier     50 viewers on an edge whose link to its origin loses 2 % each way with 50 ms each
#            way (100 ms RTT); the publisher on the origin: nothing should be lost on the way.
# Relay on CPU 0; moq-bench and moq-impair on CPU 1. BIN=dir uses prebuilt binaries (moq-edge,
# moq-bench, moq-impair).
set -euo pipefail
cd "$(dirname "$0")/.."
CCS=${CCS:-"cubic bbr2 reno"}
SCENARIOS=${SCENARIOS:-"viewers outage thin tier"}
RATE=${RATE:-100}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
PORT=${PORT:-4541}
PROXY=${PROXY:-4542}
EDGE=${EDGE:-4543}
if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    cargo build --release -p moq-edge-impair
    BIN=target/release
fi
work=$(mktemp -d)
pids=()
stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

start_relay() { # congestion control
    taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores 1 --web off --congestion-control "$1" \
        --admission-busy-pct 0 >"$work/relay.log" 2>&1 &
    relay=$!
    pids+=("$relay")
    sleep 1
}

start_edge() { # congestion control: an edge whose parent is reached through the proxy
    taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$EDGE" --cores 1 --web off --congestion-control "$1" \
        --admission-busy-pct 0 --upstream "moqt://127.0.0.1:$PROXY" --upstream-insecure true \
        >"$work/edge.log" 2>&1 &
    pids+=($!)
    sleep 1.5
}

start_proxy() { # moq-impair arguments
    taskset -c 1 "$BIN/moq-impair" --listen "127.0.0.1:$PROXY" --upstream "127.0.0.1:$PORT" --seed 7 \
        --max-clients 256 "$@" >"$work/proxy.jsonl" 2>&1 &
    pids+=($!)
    sleep 0.3
}

bench() { # json-name relay-for-subscribers subscribers [moq-bench arguments]
    # moq-bench's --relay-pid is the relay the viewers are on (the edge's in "tier"); its own
    # connections use the relay's congestion control ($cc).
    taskset -c 1 "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$2" --publish-relay "moqt://127.0.0.1:$PORT" \
        --congestion-control "$cc" "${@:4}" \
        --relay-pid "$relay" --subscribers "$3" --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" \
        --timeout-s 30 --quiet --json "$work/$1.json" >/dev/null 2>&1 || true
}

for cc in $CCS; do
    for s in $SCENARIOS; do
        case $s in
        viewers)
            # The baseline: the same 40 beside 10 through the proxy unimpaired, so that both
            # runs load the relay and moq-bench's CPU alike.
            start_relay "$cc"
            start_proxy
            bench "viewers-alone-$cc" "$PORT" 40 &
            clean=$!
            bench "viewers-unimpaired-$cc" "$PROXY" 10
            wait "$clean" || true
            stop_all
            start_relay "$cc"
            start_proxy --loss 0.03 --delay-ms 40
            bench "viewers-clean-$cc" "$PORT" 40 &
            clean=$!
            bench "viewers-impaired-$cc" "$PROXY" 10
            wait "$clean" || true
            stop_all
            ;;
        outage)
            start_relay "$cc"
            printf '%s\n' "$((WARMUP + 2))s outage" "$((WARMUP + 5))s" >"$work/outage.script"
            start_proxy --script "$work/outage.script"
            bench "outage-viewers-$cc" "$PROXY" 10
            stop_all
            ;;
        thin)
            start_relay "$cc"
            # The stream: RATE x 1200 B (x 8 bits, plus ~5 % of headers); half of it.
            start_proxy --down-rate-kbps $((RATE * 1200 * 8 * 105 / 100 / 2 / 1000)) --down-queue-kb 64
            bench "thin-viewers-$cc" "$PROXY" 10
            stop_all
            # The same viewers asking for the newest group first (Group Order descending).
            start_relay "$cc"
            start_proxy --down-rate-kbps $((RATE * 1200 * 8 * 105 / 100 / 2 / 1000)) --down-queue-kb 64
            bench "thin-newest-$cc" "$PROXY" 10 --group-order descending
            stop_all
            ;;
        tier)
            start_relay "$cc"
            start_proxy --loss 0.02 --delay-ms 50
            start_edge "$cc"
            relay=${pids[-1]}
            bench "tier-viewers-$cc" "$EDGE" 50
            stop_all
            ;;
        *) echo "bench/impaired.sh: unknown scenario $s" >&2; exit 2 ;;
        esac
    done
done

python3 - "$work" "$CCS" "$SCENARIOS" <<'PY'
import json, os, sys
work, ccs, scenarios = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
groups = {"viewers": ["alone", "clean", "impaired"], "outage": ["viewers"], "thin": ["viewers", "newest"], "tier": ["viewers"]}
print(f"{'scenario':<9} {'cc':<6} {'viewers':<20} {'delivered %':>11} {'lost':>6} {'reord':>6} {'resets':>7} {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'late':>5} {'CPU s/GB':>9} {'RSS MB':>7}")
for s in scenarios:
    for cc in ccs:
        for g in groups[s]:
            path = f"{work}/{s}-{g}-{cc}.json"
            if not os.path.exists(path):
                print(f"{s:<9} {cc:<6} {g:<20} (no result)")
                continue
            d = json.load(open(path))
            lat = d.get("latency_us") or {}
            pct = 100 * d["delivered_objects"] / d["expected"] if d.get("expected") else float("nan")
            gb = d["delivered_bytes"] / 1e9
            # Where two groups of viewers ran together the relay's CPU is over both: per GB of
            # both, on the baseline's row and the impaired ones'.
            partner = {"alone": "unimpaired", "impaired": "clean"}.get(g)
            if partner and os.path.exists(f"{work}/{s}-{partner}-{cc}.json"):
                gb += json.load(open(f"{work}/{s}-{partner}-{cc}.json"))["delivered_bytes"] / 1e9
            cpu = (d.get("relay_cpu_s") or 0) / gb if gb and g != "clean" else float("nan")
            rss = (d.get("relay_rss_max_bytes") or 0) / 2**20
            ms = lambda k: (lat.get(k) or 0) / 1e3
            label = {"alone": "40 clean, baseline", "clean": "40 clean", "impaired": "10 at 3%/80ms",
                     "newest": "10 at half, newest 1st",
                     "viewers": {"outage": "10, 3 s outage", "thin": "10 at half rate", "tier": "50 on the edge"}.get(s)}[g]
            print(f"{s:<9} {cc:<6} {label:<20} {pct:>11.2f} {d['lost']:>6} {d['reordered']:>6} {d['streams_reset']:>7} {ms('p50'):>7.1f} {ms('p99'):>7.1f} {ms('p999'):>8.1f} {d.get('late_objects', 0):>5} {cpu:>9.2f} {rss:>7.1f}")
PY
