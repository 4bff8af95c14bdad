#!/usr/bin/env bash
# CPU flame graph of the relay under a moq-bench scenario: starts the relay, attaches
# `perf record` to it for the whole moq-bench run (connections, warm-up, window, drain),
# then folds the stacks with inferno into an SVG and lists the top symbols by self time.
#
#   perf/flamegraph.sh                                  # fanout --subscribers 100 --rate 300 --duration 10 --warmup 2
#   perf/flamegraph.sh --freq 499 fanout --subscribers 50 --rate 600 --duration 5
#   perf/flamegraph.sh --cores 2 --relay-args "--gso false" fanout --tracks 4 --subscribers 25
#
# Usage: perf/flamegraph.sh [OPTIONS] [SCENARIO [MOQ-BENCH ARGS...]]
#   --freq HZ           sampling frequency (default 999)
#   --call-graph MODE   dwarf,32768 (default), dwarf[,BYTES], fp or lbr. dwarf is what works
#                       for a Rust release build without frame pointers (fp stacks stop at
#                       the first function without one; lbr needs Intel LBR, absent on VMs).
#                       BYTES is the user stack copied per sample: with perf's default 8192
#                       about half the relay's stacks were cut short, with 32768 about 1.5%
#                       (at ~32 KB per sample in perf.data, ~35 MB per second at 999 Hz).
#   --event EV          perf event (default: cycles where the CPU counts them, else cpu-clock)
#   and the common options: --port N (default 4531), --cores N (default 1),
#   --relay-args "FLAGS", --gen-cpus LIST.
# Environment: BIN (default target/release), OUT (default perf/out).
# Needs: perf; inferno-collapse-perf and inferno-flamegraph (cargo install inferno).
# Writes to OUT: relay-flame.svg, relay-top.txt (top 25 symbols by self time, also printed),
# relay-folded.txt (the collapsed stacks), perf.data, perf-report.txt, perf-record.log, and
# flamegraph-bench.json / flamegraph-bench.txt / flamegraph-relay.log (moq-bench's JSON and
# table, the relay's log).
set -euo pipefail

DEFAULT_PORT=4531
DEFAULT_SCENARIO=(fanout --subscribers 100 --rate 300 --duration 10 --warmup 2)
FREQ=999
CALL_GRAPH=dwarf,32768
EVENT=
script_option() {
    case $1 in
    --freq) FREQ=$2 ;;
    --call-graph) CALL_GRAPH=$2 ;;
    --event) EVENT=$2 ;;
    *) return 1 ;;
    esac
}
# shellcheck source=perf/lib.sh
source "$(dirname "$0")/lib.sh"
parse_args "$@"

command -v perf >/dev/null || die "perf is not installed (Debian: apt-get install linux-perf)"
missing=
for tool in inferno-collapse-perf inferno-flamegraph; do
    command -v $tool >/dev/null || missing+=" $tool"
done
[[ -z $missing ]] || die "missing on PATH:$missing; install with: cargo install inferno (puts them in ~/.cargo/bin)"

if [[ -z $EVENT ]]; then
    # On VMs without a virtual PMU, hardware events are <not supported>: sample on the
    # cpu-clock software timer instead (same flame graph, no cycle accuracy).
    probe=$(perf stat -x, -e cycles -- true 2>&1 || true)
    if [[ $probe == *"<not supported>"* || $probe == *"<not counted>"* ]]; then
        EVENT=cpu-clock
    else
        EVENT=cycles
    fi
fi

PERF_PID=
script_cleanup() {
    if [[ -n $PERF_PID ]] && kill -0 "$PERF_PID" 2>/dev/null; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
    fi
}

start_relay
rm -f "$OUT/perf.data" "$OUT/perf.data.old"
note "perf record -e $EVENT -F $FREQ -g --call-graph $CALL_GRAPH -p $RELAY_PID"
perf record -e "$EVENT" -F "$FREQ" -g --call-graph "$CALL_GRAPH" -p "$RELAY_PID" \
    -o "$OUT/perf.data" 2>"$OUT/perf-record.log" &
PERF_PID=$!
sleep 0.5
kill -0 "$PERF_PID" 2>/dev/null || { cat "$OUT/perf-record.log" >&2; die "perf record did not start"; }

run_bench

kill -INT "$PERF_PID"
wait "$PERF_PID" || true
PERF_PID=
grep -v '^\[ perf record: Woken' "$OUT/perf-record.log" >&2 || true
stop_relay

note "folding stacks (perf script | inferno-collapse-perf | inferno-flamegraph)"
# --no-inline: resolving inlined frames through addr2line takes minutes on this binary;
# inlined functions then show as part of their caller.
# --kernel: kernel frames get a "_[k]" suffix (used by the component table below).
perf script -i "$OUT/perf.data" --no-inline 2>/dev/null | inferno-collapse-perf --kernel >"$OUT/relay-folded.txt"
title="moq-edge: moq-bench ${SCENARIO_ARGS[*]} (relay --cores $RELAY_CORES${RELAY_ARGS:+ $RELAY_ARGS}; $EVENT @ $FREQ Hz)"
case $EVENT in cpu-clock | task-clock) unit=ns ;; *) unit=$EVENT ;; esac
inferno-flamegraph --title "$title" --countname "$unit" <"$OUT/relay-folded.txt" >"$OUT/relay-flame.svg"

perf report -i "$OUT/perf.data" --no-children --stdio --sort symbol -g none --no-inline \
    >"$OUT/perf-report.txt" 2>/dev/null
{
    echo "# $title"
    echo "# top 25 symbols by self time (perf report --no-children --sort symbol; [k] kernel, [.] user)"
    # Drop the comment lines and the IPC columns (always "-" without hardware counters).
    grep -v -e '^#' -e '^[[:space:]]*$' "$OUT/perf-report.txt" | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' |
        awk 'NR <= 25'
} >"$OUT/relay-top.txt"

# The samples by component (perf/components.awk says how they are attributed).
awk -f "$PERF_DIR/components.awk" "$OUT/relay-folded.txt" | sort -rn | awk -F'\t' '{
    split($1, n, " ")
    if (n[2] >= 0) printf "%5.1f%%  %7.1f%%   %s\n", 100 * n[1] / n[3], 100 * n[2] / n[3], $2
    else printf "%5.1f%%  %8s   %s\n", 100 * n[1] / n[3], "-", $2
}' >"$OUT/.components"
{
    echo "  self  in stack   component"
    cat "$OUT/.components"
} >"$OUT/relay-components.txt"
rm -f "$OUT/.components"

cat "$OUT/relay-top.txt"
echo
echo "# share of the samples by component (relay-components.txt)"
cat "$OUT/relay-components.txt"
echo
echo "flame graph: $OUT/relay-flame.svg ($(wc -l <"$OUT/relay-folded.txt") distinct stacks)"
echo "top symbols: $OUT/relay-top.txt"
printf 'moq-bench: relay CPU %.2f s in the %s s window, %s bytes delivered\n' \
    "$(json relay_cpu_s)" "$(json duration_s)" "$(json delivered_bytes)"
