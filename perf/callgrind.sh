#!/usr/bin/env bash
# Instruction counts of the relay under a (small) moq-bench scenario, for machines without
# hardware counters: runs the relay under valgrind's callgrind, which counts every user-space
# instruction executed (Ir), unaffected by whatever else the machine is doing (the work itself
# still varies a little from run to run with timing: packets, ACKs, timers). The counters are
# dumped at each phase of the run (through vgdb, as callgrind_control does), so the measured
# window's count stands alone; it reports Ir per delivered byte for that window and writes
# callgrind_annotate's top functions.
#
#   perf/callgrind.sh                # fanout --subscribers 10 --rate 50 --duration 5 --warmup 1 --timeout-s 120
#   perf/callgrind.sh fanout --subscribers 20 --rate 100 --duration 5 --warmup 1 --timeout-s 120 --draft 22
#
# Usage: perf/callgrind.sh [OPTIONS] [SCENARIO [MOQ-BENCH ARGS...]]
#   --top N         functions listed in callgrind-top.txt (default 40)
#   and the common options: --port N (default 4533), --cores N (default 1),
#   --relay-args "FLAGS", --gen-cpus LIST.
# Environment: BIN (default target/release), OUT (default perf/out).
# Needs: valgrind (callgrind, vgdb, callgrind_annotate), python3 or jq.
# The relay runs about 50x slower under callgrind: keep the load small (the default) and
# --timeout-s long, or subscribers time out and the window is not steady state.
# Writes to OUT: callgrind.out.N (one per phase, see the table it prints), callgrind.out (from
# the relay's exit: the shutdown), callgrind-top.txt (self and inclusive top functions of the
# window), callgrind.txt (the phase table), callgrind-bench.json / callgrind-bench.txt /
# callgrind-relay.log.
# What callgrind does not count: the kernel's work (UDP sendmsg/recvmsg, io_uring), which
# perf/stat.sh's task-clock and perf/flamegraph.sh include, and time spent waiting.
#
# valgrind and io_uring (the relay's glommio executor): valgrind 3.19 runs the relay and the
# bench completes, but an idle executor thread sleeps in io_uring_enter while holding
# valgrind's thread lock, so the relay's other threads (its main thread at start, the SIGTERM
# handler at the end) only run when a packet or a timer wakes it: without help the start
# sometimes stalls before the "serving" line and an idle relay never exits. lib.sh sends a
# junk datagram to the port every second while waiting for either (the relay drops it).
set -euo pipefail

DEFAULT_PORT=4533
DEFAULT_SCENARIO=(fanout --subscribers 10 --rate 50 --duration 5 --warmup 1 --timeout-s 120)
TOP=40
START_TIMEOUT_S=${START_TIMEOUT_S:-120}
STOP_TIMEOUT_S=${STOP_TIMEOUT_S:-60}
script_option() {
    case $1 in
    --top) TOP=$2 ;;
    *) return 1 ;;
    esac
}
# shellcheck source=perf/lib.sh
source "$(dirname "$0")/lib.sh"
parse_args "$@"
for tool in valgrind vgdb callgrind_annotate; do
    command -v $tool >/dev/null || die "$tool not found (Debian: apt-get install valgrind)"
done

# dump NAME: writes the counters since the last dump to OUT/callgrind.out.N and zeroes them.
# Through vgdb (what callgrind_control -d runs), because callgrind_control exits 0 even when
# it did not find the process, which happened once right after the relay's start.
dump() {
    local _
    for _ in 1 2 3; do
        vgdb --pid="$RELAY_PID" dump "$1" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    note "vgdb --pid=$RELAY_PID dump $1 failed: that phase's count is merged into the next"
}
window_start() { dump setup-and-warm-up; }
window_end() { dump window; }

rm -f "$OUT"/callgrind.out "$OUT"/callgrind.out.*
# --compress-strings/pos=no: each dump then names its functions itself (compressed names are
# defined once per run, so a later dump could not be annotated on its own).
start_relay valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
    --compress-strings=no --compress-pos=no
dump startup
run_bench
dump drain
stop_relay

# The phase of each file, from its "desc: Trigger:" line; its total from "summary:".
bytes=$(json delivered_bytes)
window_file=
{
    echo "relay under callgrind: moq-edge --cores $RELAY_CORES${RELAY_ARGS:+ $RELAY_ARGS}; moq-bench ${SCENARIO_ARGS[*]}"
    printf '%-40s %-20s %16s\n' file phase "Ir (user space)"
    run_ir=0
    mapfile -t dumps < <(printf '%s\n' "$OUT"/callgrind.out.* | sort -V)
    for f in "${dumps[@]}" "$OUT/callgrind.out"; do
        [[ -s $f ]] || continue
        phase=$(sed -n 's/^desc: Trigger: //p' "$f" | head -1)
        case $phase in
        "Program termination") phase=shutdown ;;
        dump\ *) phase=${phase#dump } ;;
        esac
        ir=$(awk '/^summary:/ { print $2; exit }' "$f")
        printf '%-40s %-20s %16s\n' "${f#"$OUT"/}" "$phase" "$ir"
        case $phase in
        window) window_file=$f ;;
        esac
        case $phase in setup-and-warm-up | window | drain) run_ir=$((run_ir + ir)) ;; esac
    done
    echo
    echo "moq-bench run (setup-and-warm-up + window + drain): $run_ir Ir"
    if [[ -n $window_file ]]; then
        window_ir=$(awk '/^summary:/ { print $2; exit }' "$window_file")
        echo "window: $window_ir Ir for $bytes bytes ($(json delivered_objects) objects) delivered:" \
            "$(ratio "$window_ir" "$bytes" 1) Ir per delivered byte"
    else
        echo "no window dump (moq-bench's progress line never said \"measuring\"):" \
            "whole run / window bytes = $(ratio "$run_ir" "$bytes" 1) Ir per delivered byte (includes handshakes and warm-up)"
    fi
} >"$OUT/callgrind.txt"
cat "$OUT/callgrind.txt"

[[ -n $window_file ]] || window_file=$OUT/callgrind.out
# annotate yes|no: callgrind_annotate's function table for the window, paths shortened.
# A dump taken mid-run records the calls still in progress (the thread's outer frames) as
# "calls=0"; callgrind_annotate 3.19 counts those as the caller's self cost (it only treats
# calls=N>0 as a call), which puts the whole window on clone/start_thread. Annotating a copy
# with calls=0 read as calls=1 gives the right self and inclusive costs.
sed 's/^calls=0 /calls=1 /' "$window_file" >"$OUT/.annotate.out"
annotate() {
    callgrind_annotate --auto=no --inclusive="$1" "$OUT/.annotate.out" 2>/dev/null |
        sed -n '/^Ir  *file:function/,$p' | grep -v -e '^---' -e '^[[:space:]]*$' |
        sed -E -e "s#$ROOT/##" -e 's#/[^ ]*/\.cargo/registry/src/[^/]+/##' -e 's#/rustc/[0-9a-f]+/library/#std/#' \
            -e 's#[^ ]*target/release/build/boring-sys-[^/]+/out/boringssl/#boringssl/#' \
            -e 's# \[[^] ]*/([^/]+)\]$# [\1]#' |
        awk -v n="$TOP" 'NR <= n + 1'
}
{
    echo "# $window_file: self cost (exclusive), top $TOP"
    annotate no
    echo
    echo "# $window_file: inclusive cost, top $TOP"
    annotate yes
} >"$OUT/callgrind-top.txt"
rm -f "$OUT/.annotate.out"
sed -n "1,$((TOP / 2 + 3))p" "$OUT/callgrind-top.txt"
echo "..."
echo "top functions: $OUT/callgrind-top.txt; open a dump with: callgrind_annotate $window_file (or kcachegrind)"
