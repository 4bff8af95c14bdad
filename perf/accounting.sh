#!/usr/bin/env bash
# Where the relay's CPU goes per packet sent, by component, beside the floor's (bench/floor's
# moq-floor sender thread, the same shape: what the kernel and the crypto alone cost), at
# each load, in one run: the process's CPU time per packet sent over seconds of steady state
# without perf (the relay's from /proc and moq_edge_udp_datagrams_out_total read together;
# moq-floor's sender thread's own us_per_packet), split by the shares of `perf record -e
# cpu-clock` samples over as many seconds after (perf/components.awk; perf's unwinding adds
# CPU time to the process it samples, so the totals are taken without it).
#
#   perf/accounting.sh                               # 100x300 100x600 100x800 100x30x16384
#   LOADS="100x300" perf/accounting.sh
#   RUNS=3 perf/accounting.sh                        # three runs, then perf/remains.py's table
#
# Environment: ACK_EVERY (moq-bench's subscribers acknowledge every this many packets;
# default 2, the floor's model of a subscriber and RFC 9000's recommendation; 1 is quiche's
# own, an ACK per packet), BIN (default target/release), SECONDS_MEASURED (default 5), FREQ (sampling
# Hz, default 999), OUT (default perf/out/accounting: the folded stacks and the table),
# PORT (4537), METRICS (9537), RUNS (default 1; more: each run in OUT/run-N, then the medians
# over them grouped by what could take each cost out, perf/remains.py, in OUT/remains.md).
# Relay and moq-floor's sender on CPU 0; moq-bench and the floor's sink on CPU 1. Needs perf
# and inferno-collapse-perf (cargo install inferno).
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.."
LOADS=${LOADS:-"100x300 100x600 100x800 100x30x16384"}
BIN=${BIN:-target/release}
D=${SECONDS_MEASURED:-5}
FREQ=${FREQ:-999}
ACK_EVERY=${ACK_EVERY:-2}
OUT=${OUT:-perf/out/accounting}
PORT=${PORT:-4537}
METRICS=${METRICS:-9537}
RUNS=${RUNS:-1}
if ((RUNS > 1)); then
    for i in $(seq 1 "$RUNS"); do
        RUNS=1 OUT="$OUT/run-$i" "$self"
    done
    # shellcheck disable=SC2046 # one directory per run
    python3 perf/remains.py $(seq -f "$OUT/run-%g" 1 "$RUNS") | tee "$OUT/remains.md"
    exit
fi
mkdir -p "$OUT"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

cpu_ticks() { # utime + stime of a process, in clock ticks
    awk '{print $14 + $15}' "/proc/$1/stat"
}

out_packets() {
    curl -s "http://127.0.0.1:$METRICS/metrics" |
        awk '/^moq_edge_udp_datagrams_out_total\{core="all"\}/ {print $2}'
}

record() { # what (pid or tid option) seconds output
    perf record -e cpu-clock -F "$FREQ" -g --call-graph dwarf,32768 "$1" "$2" -o "$OUT/perf.data" \
        -- sleep "$3" 2>/dev/null >/dev/null
    perf script -i "$OUT/perf.data" --no-inline 2>/dev/null | inferno-collapse-perf --kernel >"$4"
    rm -f "$OUT/perf.data" "$OUT/perf.data.old"
}

for load in $LOADS; do
    IFS=x read -r subs rate size <<<"$load"
    size=${size:-1200}
    # moq-edge: the fan-out runs 2 D + 6 s; D s are counted, the next D s recorded.
    taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores 1 --metrics "127.0.0.1:$METRICS" \
        --web off >"$OUT/relay-$load.log" 2>&1 &
    relay=$!
    pids+=("$relay")
    sleep 1
    taskset -c 1 "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$PORT" --subscribers "$subs" --rate "$rate" \
        --object-size "$size" --ack-every "$ACK_EVERY" --warmup 3 --duration $((2 * D + 3)) --quiet \
        >"$OUT/bench-$load.txt" 2>&1 &
    bench=$!
    pids+=("$bench")
    sleep 4
    before=$(out_packets)
    ticks=$(cpu_ticks "$relay")
    sleep "$D"
    ticks=$(($(cpu_ticks "$relay") - ticks))
    packets=$(($(out_packets) - before))
    record -p "$relay" "$D" "$OUT/edge-$load.folded"
    echo "$packets" >"$OUT/edge-$load.packets"
    python3 -c 'import os, sys; print(int(sys.argv[1]) / os.sysconf("SC_CLK_TCK") * 1e6 / max(int(sys.argv[2]), 1))' \
        "$ticks" "$packets" >"$OUT/edge-$load.us"
    wait "$bench" || true
    kill "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true

    # The floor: once for its cost (its own count), once under perf (its sender thread is
    # the process's main thread).
    taskset -c 0,1 "$BIN/moq-floor" --subscribers "$subs" --rate "$rate" --object-size "$size" \
        --warmup 2 --duration "$D" --json "$OUT/floor-$load.json" >/dev/null
    taskset -c 0,1 "$BIN/moq-floor" --subscribers "$subs" --rate "$rate" --object-size "$size" \
        --warmup 2 --duration $((D + 2)) >/dev/null &
    floor=$!
    pids+=("$floor")
    sleep 3
    record -t "$floor" "$D" "$OUT/floor-$load.folded"
    wait "$floor" || true
    python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["packets"]); print(j["us_per_packet"], file=sys.stderr)' \
        "$OUT/floor-$load.json" >"$OUT/floor-$load.packets" 2>"$OUT/floor-$load.us"
done

for load in $LOADS; do
    for who in edge floor; do
        awk -f perf/components.awk "$OUT/$who-$load.folded" >"$OUT/$who-$load.components"
    done
done
python3 - "$OUT" "$LOADS" <<'PY' | tee "$OUT/table.txt"
import sys
out, loads = sys.argv[1], sys.argv[2].split()
def read(who, load):
    packets = int(open(f"{out}/{who}-{load}.packets").read())
    us = float(open(f"{out}/{who}-{load}.us").read())
    comps = {}
    for line in open(f"{out}/{who}-{load}.components"):
        nums, name = line.rstrip("\n").split("\t")
        own, _, total = map(float, nums.split())
        if name != "quiche (all of it)":
            comps[name] = us * own / max(total, 1)
    return packets, comps
data = {(w, l): read(w, l) for w in ("edge", "floor") for l in loads}
names = sorted({n for (_, c) in data.values() for n in c}, key=lambda n: -data[("edge", loads[0])][1].get(n, 0))
head = f"{'µs per packet sent':<56}" + "".join(f"{l:>22}" for l in loads)
print(head)
print(f"{'':<56}" + "".join(f"{'moq-edge':>12}{'floor':>10}" for _ in loads))
for n in names:
    print(f"{n:<56}" + "".join(f"{data[('edge', l)][1].get(n, 0):>12.2f}{data[('floor', l)][1].get(n, 0):>10.2f}" for l in loads))
print(f"{'total':<56}" + "".join(f"{sum(data[('edge', l)][1].values()):>12.2f}{sum(data[('floor', l)][1].values()):>10.2f}" for l in loads))
print(f"{'x floor':<56}" + "".join(f"{sum(data[('edge', l)][1].values()) / max(sum(data[('floor', l)][1].values()), 1e-9):>12.2f}{'':>10}" for l in loads))
print(f"{'packets sent in the counted seconds':<56}" + "".join(f"{data[('edge', l)][0]:>12}{data[('floor', l)][0]:>10}" for l in loads))
PY
