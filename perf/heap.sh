#!/usr/bin/env bash
# Memory of the relay under a moq-bench scenario: samples its VmRSS / VmHWM from /proc every
# 100 ms into a CSV, and optionally runs it under a heap profiler.
#
#   perf/heap.sh                                   # heaptrack; fanout --subscribers 100 --rate 300 --duration 10 --warmup 2
#   perf/heap.sh --tool none fanout --subscribers 1000 --rate 30 --timeout-s 60
#   perf/heap.sh --tool massif fanout --subscribers 10 --rate 50 --duration 5 --warmup 1 --timeout-s 120
#
# Usage: perf/heap.sh [OPTIONS] [SCENARIO [MOQ-BENCH ARGS...]]
#   --tool heaptrack|massif|none   the profiler to run the relay under (default heaptrack)
#   --massif-pages yes|no          massif's --pages-as-heap (default yes; see below)
#   and the common options: --port N (default 4534), --cores N (default 1),
#   --relay-args "FLAGS", --gen-cpus LIST.
# Environment: BIN (default target/release), OUT (default perf/out).
# Writes to OUT: rss.csv (t_s since the relay started, vmrss_kib, vmhwm_kib, rss_anon_kib,
# phase), heap.txt (the summary printed at the end), heap-bench.json / heap-bench.txt /
# heap-relay.log, and
#   heaptrack: heaptrack.moq-edge.zst (or .gz; open with heaptrack_gui or heaptrack_print),
#              heaptrack.txt (heaptrack_print: top peak consumers and allocators);
#   massif:    massif.out, massif.txt (ms_print).
#
# The relay runs with MIMALLOC_SHOW_STATS=1, so mimalloc prints its arena figures at exit
# (reserved, committed, purged, peak RSS); heap.txt quotes them.
# What each tool can see in this relay: the Rust code allocates through mimalloc, the global
# allocator, which is linked in statically and takes its memory from the kernel with mmap, so
# malloc interposers (heaptrack, massif's default mode) see none of it; they see only the
# C code that calls libc malloc, in practice BoringSSL (OPENSSL_malloc: TLS state per
# connection). massif with --pages-as-heap=yes counts every mapped page instead (mimalloc's
# segments, io_uring rings, thread stacks, the binary), which covers all of it but as
# mapped, not resident, memory: mimalloc reserves a 1 GiB arena up front and glibc 64 MiB
# heaps for its thread arenas, so its peak (~1.2 GiB here) is mostly address space never
# touched.
# The RSS samples are the ground truth for "how much memory"; under massif they are
# valgrind's, not the relay's (much larger), and under heaptrack they include heaptrack's
# own buffers. --tool none gives the relay's own RSS.
set -euo pipefail

DEFAULT_PORT=4534
DEFAULT_SCENARIO=(fanout --subscribers 100 --rate 300 --duration 10 --warmup 2)
TOOL=heaptrack
MASSIF_PAGES=yes
script_option() {
    case $1 in
    --tool) TOOL=$2 ;;
    --massif-pages) MASSIF_PAGES=$2 ;;
    *) return 1 ;;
    esac
}
# shellcheck source=perf/lib.sh
source "$(dirname "$0")/lib.sh"
parse_args "$@"

wrapper=()
case $TOOL in
heaptrack)
    if ! command -v heaptrack >/dev/null || ! command -v heaptrack_print >/dev/null; then
        die "heaptrack not found (Debian: apt-get install heaptrack); or use --tool massif|none"
    fi
    rm -f "$OUT"/heaptrack.moq-edge.*
    wrapper=(heaptrack -o "$OUT/heaptrack.moq-edge")
    ;;
massif)
    if ! command -v valgrind >/dev/null || ! command -v ms_print >/dev/null; then
        die "valgrind not found (Debian: apt-get install valgrind)"
    fi
    [[ $MASSIF_PAGES == yes || $MASSIF_PAGES == no ]] || die "--massif-pages: yes or no"
    rm -f "$OUT/massif.out"
    wrapper=(valgrind --tool=massif --massif-out-file="$OUT/massif.out" --pages-as-heap="$MASSIF_PAGES")
    START_TIMEOUT_S=120
    STOP_TIMEOUT_S=60
    ;;
none) ;;
*) die "--tool: heaptrack, massif or none" ;;
esac

SAMPLER_PID=
script_cleanup() {
    if [[ -n $SAMPLER_PID ]]; then
        kill "$SAMPLER_PID" 2>/dev/null || true
        wait "$SAMPLER_PID" 2>/dev/null || true
        SAMPLER_PID=
    fi
}

# sample_rss PID T0: one CSV row every 100 ms while PID lives; the phase comes from
# OUT/.heap-phase (written by this script and by the window hooks).
sample_rss() {
    local pid=$1 t0=$2 k v rss hwm anon phase
    echo "t_s,vmrss_kib,vmhwm_kib,rss_anon_kib,phase"
    while [[ -r /proc/$pid/status ]]; do
        rss='' hwm='' anon=''
        while read -r k v _; do
            case $k in
            VmRSS:) rss=$v ;;
            VmHWM:) hwm=$v ;;
            RssAnon:) anon=$v ;;
            esac
        done <"/proc/$pid/status" 2>/dev/null || break
        [[ -n $rss ]] || break
        phase=$(<"$OUT/.heap-phase") 2>/dev/null || phase='?'
        awk -v t="$EPOCHREALTIME" -v t0="$t0" -v r="$rss" -v h="$hwm" -v a="$anon" -v p="$phase" \
            'BEGIN { printf "%.1f,%s,%s,%s,%s\n", t - t0, r, h, a, p }'
        sleep 0.1
    done
}
window_start() { echo window >"$OUT/.heap-phase"; }
window_end() { echo drain >"$OUT/.heap-phase"; }

t0=$EPOCHREALTIME
echo idle >"$OUT/.heap-phase"
# MIMALLOC_SHOW_STATS=1: mimalloc prints its statistics to stderr (the relay's log) at exit.
start_relay env MIMALLOC_SHOW_STATS=1 "${wrapper[@]}"
sample_rss "$RELAY_PID" "$t0" >"$OUT/rss.csv" &
SAMPLER_PID=$!
sleep 0.5
echo setup >"$OUT/.heap-phase"
run_bench
echo after >"$OUT/.heap-phase"
sleep 1
stop_relay
script_cleanup
rm -f "$OUT/.heap-phase"

# summary: first, max and last VmRSS of each phase, and the peak VmHWM, from rss.csv.
summary() {
    awk -F, -v tool="$TOOL" '
        NR == 1 { next }
        {
            if (!($5 in first)) { first[$5] = $2; order[++n] = $5 }
            last[$5] = $2; if ($2 > max[$5]) max[$5] = $2; if ($3 > hwm) hwm = $3
        }
        END {
            printf "VmRSS per phase (MiB; sampled every 100 ms%s):\n", tool == "none" ? "" : ", under " tool
            printf "  %-8s %8s %8s %8s\n", "phase", "first", "max", "last"
            for (i = 1; i <= n; i++) {
                p = order[i]
                printf "  %-8s %8.1f %8.1f %8.1f\n", p, first[p] / 1024, max[p] / 1024, last[p] / 1024
            }
            printf "VmHWM (peak RSS) %.1f MiB\n", hwm / 1024
        }' "$OUT/rss.csv"
}

{
    echo "relay: moq-edge --cores $RELAY_CORES${RELAY_ARGS:+ $RELAY_ARGS}; moq-bench ${SCENARIO_ARGS[*]}"
    echo "phases: idle (relay up), setup (connections, subscriptions, warm-up), window (moq-bench's" \
        "measured window), drain, after (1 s after moq-bench exited)"
    summary
    printf 'moq-bench (its own /proc samples of pid %s): RSS %.1f MiB at its start, %.1f MiB max; %s subscriber connections\n' \
        "$RELAY_PID" "$(awk -v b="$(json relay.rss_start_bytes)" 'BEGIN { print b / 1048576 }')" \
        "$(awk -v b="$(json relay_rss_max_bytes)" 'BEGIN { print b / 1048576 }')" "$(json subscriber_sessions)"
    # mimalloc's own figures for the whole run (this release build keeps the OS-level ones:
    # arena memory reserved, committed, purged; not per-size-class allocation counts).
    if grep -q '^ *committed *:' "$OUT/$TAG-relay.log"; then
        echo "mimalloc (MIMALLOC_SHOW_STATS=1, printed at the relay's exit; the Rust heap):"
        echo "                    peak       total     current"
        awk '/^ arenas/ { on = 1 } on && /^ *(reserved|committed|purged) *:/ { printf "  %s\n", $0 }
             /^ *process *:/ { sub(/^ */, ""); printf "  %s\n", $0 }' "$OUT/$TAG-relay.log" |
            sed -E 's/[[:space:]]+$//'
    else
        echo "mimalloc printed no statistics at exit (see $OUT/$TAG-relay.log)"
    fi
} >"$OUT/heap.txt"

case $TOOL in
heaptrack)
    file=$(compgen -G "$OUT/heaptrack.moq-edge.*" | head -1 || true)
    if [[ -z $file ]]; then
        echo "heaptrack wrote no file (see $OUT/$TAG-relay.log)" >>"$OUT/heap.txt"
    else
        heaptrack_print -f "$file" --print-peaks=1 --print-allocators=1 --print-temporary=0 \
            --print-leaks=0 -n 5 -s 2 >"$OUT/heaptrack.txt" 2>/dev/null || true
        {
            echo
            echo "heaptrack ($file; all of heaptrack_print's text in heaptrack.txt):"
            grep -E '^(total runtime|calls to allocation|temporary memory|peak heap|peak RSS|total memory leaked)' \
                "$OUT/heaptrack.txt" | sed 's/^/  /'
            echo "  top peak consumers (by allocating function):"
            awk '/^PEAK MEMORY CONSUMERS/ { on = 1; next } /^MOST CALLS/ { on = 0 }
                 on && /peak memory consumed over/ { getline f; printf "    %s  %s\n", $0, f }' \
                "$OUT/heaptrack.txt" | head -5
            echo "  note: only libc-malloc allocations (BoringSSL's); the Rust heap is mimalloc's and invisible here"
        } >>"$OUT/heap.txt"
    fi
    ;;
massif)
    if [[ -s $OUT/massif.out ]]; then
        ms_print "$OUT/massif.out" >"$OUT/massif.txt"
        {
            echo
            echo "massif (--pages-as-heap=$MASSIF_PAGES; ms_print in massif.txt):"
            what="malloc heap (+ its overhead)"
            [[ $MASSIF_PAGES == yes ]] && what="mapped pages"
            awk -F= -v what="$what" '
                /^mem_heap_B=/ { t = $2 } /^mem_heap_extra_B=/ { t += $2; if (t > peak) peak = t }
                END { printf "  peak %s: %.1f MiB\n", what, peak / 1048576 }' "$OUT/massif.out"
        } >>"$OUT/heap.txt"
    else
        echo "massif wrote no file (see $OUT/$TAG-relay.log)" >>"$OUT/heap.txt"
    fi
    ;;
esac
cat "$OUT/heap.txt"
echo "RSS samples: $OUT/rss.csv"
