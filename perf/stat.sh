#!/usr/bin/env bash
# Counters of the relay under a moq-bench scenario, per delivered byte: starts the relay,
# runs `perf stat -p RELAY` twice at once, one over the whole moq-bench run and one over
# moq-bench's measured window only, and divides the window's counts by the bytes (and
# objects) moq-bench delivered in that window.
#
#   perf/stat.sh                                        # fanout --subscribers 100 --rate 300 --duration 10 --warmup 2
#   perf/stat.sh --relay-args "--gso false" fanout --subscribers 100 --rate 300
#   perf/stat.sh --events task-clock,context-switches fanout --tracks 8 --subscribers 10
#
# Usage: perf/stat.sh [OPTIONS] [SCENARIO [MOQ-BENCH ARGS...]]
#   --events LIST   perf events (default
#                   cycles,instructions,cache-misses,task-clock,context-switches,cpu-migrations,page-faults;
#                   those the machine cannot count show as "<not supported>" and are skipped)
#   and the common options: --port N (default 4532), --cores N (default 1),
#   --relay-args "FLAGS", --gen-cpus LIST.
# Environment: BIN (default target/release), OUT (default perf/out).
# Needs: perf, and python3 or jq (to read moq-bench's JSON).
# Writes to OUT: stat.txt (the table printed at the end), stat-run.csv and stat-window.csv
# (perf stat -x, output), stat-bench.json / stat-bench.txt / stat-relay.log.
# The headline is cycles per delivered byte where the CPU counts cycles; where it does not
# (VMs without a virtual PMU, like this project's development machine), task-clock ns per
# delivered byte, which is CPU time and includes the kernel's share (UDP send/receive).
set -euo pipefail

DEFAULT_PORT=4532
DEFAULT_SCENARIO=(fanout --subscribers 100 --rate 300 --duration 10 --warmup 2)
EVENTS=cycles,instructions,cache-misses,task-clock,context-switches,cpu-migrations,page-faults
script_option() {
    case $1 in
    --events) EVENTS=$2 ;;
    *) return 1 ;;
    esac
}
# shellcheck source=perf/lib.sh
source "$(dirname "$0")/lib.sh"
parse_args "$@"
command -v perf >/dev/null || die "perf is not installed (Debian: apt-get install linux-perf)"

RUN_PERF_PID=
script_cleanup() {
    if [[ -n $RUN_PERF_PID ]] && kill -0 "$RUN_PERF_PID" 2>/dev/null; then
        kill -INT "$RUN_PERF_PID" 2>/dev/null || true
        wait "$RUN_PERF_PID" 2>/dev/null || true
    fi
}

# Called by run_bench (in its progress-reading subshell) at the window's edges.
WIN_PERF_PID=
window_start() {
    perf stat -x, -e "$EVENTS" -p "$RELAY_PID" -o "$OUT/stat-window.csv" &
    WIN_PERF_PID=$!
}
window_end() {
    [[ -n $WIN_PERF_PID ]] || return 0
    kill -INT "$WIN_PERF_PID" 2>/dev/null || true
    wait "$WIN_PERF_PID" 2>/dev/null || true
}

start_relay
rm -f "$OUT/stat-run.csv" "$OUT/stat-window.csv"
perf stat -x, -e "$EVENTS" -p "$RELAY_PID" -o "$OUT/stat-run.csv" &
RUN_PERF_PID=$!
sleep 0.3

run_bench

kill -INT "$RUN_PERF_PID"
wait "$RUN_PERF_PID" || true
RUN_PERF_PID=
stop_relay

bytes=$(json delivered_bytes)
objects=$(json delivered_objects)
bench_cpu_s=$(json relay_cpu_s)
window=$(window_s)
[[ -s $OUT/stat-window.csv ]] || note "no window counts (moq-bench's progress line never said \"measuring\"); per-byte figures use the whole run"

# table RUN_CSV WINDOW_CSV BYTES OBJECTS
table() {
    awk -F, -v bytes="$3" -v objects="$4" '
        function load(file, dst,    line, f) {
            while ((getline line < file) > 0) {
                if (line ~ /^#/ || line ~ /^[[:space:]]*$/) continue
                split(line, f, ",")
                if (!(f[3] in order)) { order[f[3]] = ++n; name[n] = f[3]; unit[n] = f[2] }
                dst[f[3]] = f[1]
            }
        }
        function num(v) { return v ~ /^[0-9.]+$/ }
        BEGIN {
            load(ARGV[1], run); if (ARGV[2] != "") load(ARGV[2], win)
            printf "%-28s %16s %16s %14s %14s\n", "event", "whole run", "window", "per byte", "per object"
            for (i = 1; i <= n; i++) {
                e = name[i]; u = unit[i] == "" ? "" : " (" unit[i] ")"
                r = run[e]; w = (ARGV[2] != "") ? win[e] : r
                if (!num(r) && !num(w)) { printf "%-28s %16s\n", e, r; continue }
                pb = (num(w) && bytes > 0) ? w / bytes : ""
                po = (num(w) && objects > 0) ? w / objects : ""
                if (unit[i] == "msec") { pb = pb * 1e6; po = po * 1e6; u = " (msec; per: ns)" }
                printf "%-28s %16s %16s %14.4g %14.4g\n", e u, r, w, pb, po
            }
        }' "$1" "$2"
}

{
    echo "relay: moq-edge --cores $RELAY_CORES${RELAY_ARGS:+ $RELAY_ARGS}; moq-bench ${SCENARIO_ARGS[*]}"
    echo "window: perf stat attached for ${window:-?} s (moq-bench's window: $(json duration_s) s); delivered in it: $bytes bytes, $objects objects"
    if [[ -s $OUT/stat-window.csv ]]; then
        table "$OUT/stat-run.csv" "$OUT/stat-window.csv" "$bytes" "$objects"
    else
        table "$OUT/stat-run.csv" "" "$bytes" "$objects"
    fi
    src=$OUT/stat-window.csv
    [[ -s $src ]] || src=$OUT/stat-run.csv
    cycles=$(awk -F, '$3 == "cycles" && $1 ~ /^[0-9.]+$/ { print $1 }' "$src")
    task_ms=$(awk -F, '$3 == "task-clock" && $1 ~ /^[0-9.]+$/ { print $1 }' "$src")
    echo
    if [[ -n $cycles ]]; then
        echo "cycles per delivered byte: $(ratio "$cycles" "$bytes" 2)"
    elif [[ -n $task_ms ]]; then
        echo "no cycle counter here; task-clock per delivered byte: $(ratio "$(awk -v m="$task_ms" 'BEGIN { print m * 1e6 }')" "$bytes" 3) ns"
        ghz=$(json cpu_ghz)
        [[ -n $ghz ]] && echo "  x $ghz GHz (moq-bench's clock figure) = $(ratio "$(awk -v m="$task_ms" -v g="$ghz" 'BEGIN { print m * 1e6 * g }')" "$bytes" 2) cycles per byte, estimated from time"
        awk -v b="$bench_cpu_s" -v m="$task_ms" 'BEGIN {
            printf "  cross-check: relay CPU in the window: perf task-clock %.3f s, moq-bench (from /proc) %.3f s\n", m / 1000, b }'
    fi
} | tee "$OUT/stat.txt"
