#!/usr/bin/env bash
# System calls and context switches per packet sent: moq-edge under a moq-bench fan-out, and
# the floor (bench/floor's moq-floor sender thread) for the same shape, side by side in one
# run. Counts come from `perf stat` tracepoints (raw_syscalls and syscalls:sys_enter_*, which
# work without hardware counters) over the same number of seconds of steady state; packets
# from the relay's metrics (moq_edge_udp_datagrams_out_total) and from moq-floor's report.
#
#   perf/syscalls.sh                     # 100 subscribers x 300 objects/s x 1200 B
#   perf/syscalls.sh 100 800 1200
#   perf/syscalls.sh 100 30 16384
#
# Environment: BIN (default target/release), SECONDS_MEASURED (default 5), PORT (4536),
# METRICS (9536). The relay and moq-floor's sender run on CPU 0, moq-bench and the sink on 1.
set -euo pipefail
cd "$(dirname "$0")/.."
SUBS=${1:-100}
RATE=${2:-300}
SIZE=${3:-1200}
BIN=${BIN:-target/release}
D=${SECONDS_MEASURED:-5}
PORT=${PORT:-4536}
METRICS=${METRICS:-9536}
CALLS="sendmsg sendmmsg recvmsg recvmmsg io_uring_enter epoll_wait clock_nanosleep futex"
EVENTS="raw_syscalls:sys_enter,context-switches,task-clock"
for c in $CALLS; do EVENTS="$EVENTS,syscalls:sys_enter_$c"; done
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

out_packets() {
    curl -s "http://127.0.0.1:$METRICS/metrics" |
        awk '/^moq_edge_udp_datagrams_out_total\{core="all"\}/ {print $2}'
}

# moq-edge: the fan-out runs D + 6 s; perf counts D s of its middle.
taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores 1 --metrics "127.0.0.1:$METRICS" \
    --web off >"$work/relay.log" 2>&1 &
relay=$!
pids+=("$relay")
sleep 1
taskset -c 1 "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$PORT" --subscribers "$SUBS" --rate "$RATE" \
    --object-size "$SIZE" --warmup 3 --duration $((D + 3)) --quiet >"$work/bench.txt" 2>&1 &
pids+=($!)
sleep 4
before=$(out_packets)
perf stat -x, -e "$EVENTS" -p "$relay" -- sleep "$D" 2>"$work/relay.csv"
after=$(out_packets)
wait "${pids[1]}" || true
kill "$relay" 2>/dev/null || true

# The floor: its sender thread is the process's main thread.
taskset -c 0,1 "$BIN/moq-floor" --subscribers "$SUBS" --rate "$RATE" --object-size "$SIZE" \
    --warmup 2 --duration $((D + 2)) --json "$work/floor.json" >/dev/null &
floor=$!
pids+=("$floor")
sleep 3
perf stat -x, -e "$EVENTS" -t "$floor" -- sleep "$D" 2>"$work/floor.csv"
wait "$floor" || true

python3 - "$work" "$((after - before))" "$D" "$SUBS" "$RATE" "$SIZE" <<'PY'
import csv, json, sys
work, relay_packets, secs, subs, rate, size = sys.argv[1], int(float(sys.argv[2])), *map(int, sys.argv[3:])
def counts(path):
    out = {}
    for row in csv.reader(open(path)):
        if len(row) > 2 and row[0] and row[0][0].isdigit():
            out[row[2]] = float(row[0])
    return out
relay, floor = counts(f"{work}/relay.csv"), counts(f"{work}/floor.csv")
fj = json.load(open(f"{work}/floor.json"))
floor_packets = fj["packets"] / fj["duration_s"] * secs
print(f"{subs} subscribers x {rate}/s x {size} B, {secs} s each: packets sent moq-edge {relay_packets}, floor {floor_packets:.0f}")
print(f"{'per packet':<28} {'moq-edge':>10} {'floor':>10}")
for key in sorted(set(relay) | set(floor), key=lambda k: (k != "task-clock", k)):
    r = relay.get(key, 0) / max(relay_packets, 1)
    f = floor.get(key, 0) / max(floor_packets, 1)
    name = key.replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "all syscalls")
    if key == "task-clock":  # milliseconds
        name, r, f = "CPU us (task-clock)", r * 1e3, f * 1e3
    print(f"{name:<28} {r:>10.3f} {f:>10.3f}")
PY
