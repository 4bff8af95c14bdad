#!/usr/bin/env bash
# What a core's turns are spent on, at each load: the relay's runtime counters read from its
# metrics endpoint over seconds of steady state, as rates a second (turns; connections
# serviced, and of those the ones that sent nothing; pacing releases; datagrams in and out,
# trains, reads), beside the relay's CPU time over the same seconds (from /proc) and
# moq-bench's latency. Relay on CPU 0, moq-bench on CPU 1.
#
#   perf/turns.sh                                    # 100x300 and 100x30x16384
#   LOADS="100x800" RELAY_ARGS="--congestion-control cubic" perf/turns.sh
#
# Environment: LOADS (SUBSCRIBERSxRATE[xOBJECT_BYTES]), ACK_EVERY (moq-bench's subscribers
# acknowledge every this many packets, default 2), BIN (default target/release),
# SECONDS_MEASURED (default 5), RELAY_ARGS (more relay flags), PORT (4538), METRICS (9538).
set -euo pipefail
cd "$(dirname "$0")/.."
LOADS=${LOADS:-"100x300 100x30x16384"}
BIN=${BIN:-target/release}
D=${SECONDS_MEASURED:-5}
ACK_EVERY=${ACK_EVERY:-2}
PORT=${PORT:-4538}
METRICS=${METRICS:-9538}
pids=()
out=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$out"' EXIT

counters() { # name value, one per line, every core together
    curl -s "http://127.0.0.1:$METRICS/metrics" |
        awk '/core="all"/ && /^moq_edge_(turns|connection_services|connection_idle_services|pacing_releases|udp_datagrams_in|udp_datagrams_out|udp_trains_out|udp_recv_batches)_total/ {
            sub(/\{.*\}/, "", $1); print $1, $2 }' | sort
}

for load in $LOADS; do
    IFS=x read -r subs rate size <<<"$load"
    size=${size:-1200}
    # shellcheck disable=SC2086 # RELAY_ARGS is a list of flags
    taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores 1 --metrics "127.0.0.1:$METRICS" \
        --web off ${RELAY_ARGS:-} >"$out/relay.log" 2>&1 &
    relay=$!
    pids+=("$relay")
    sleep 1
    taskset -c 1 "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$PORT" --subscribers "$subs" --rate "$rate" \
        --object-size "$size" --ack-every "$ACK_EVERY" --warmup 2 --duration $((D + 5)) --quiet >"$out/bench.txt" 2>&1 &
    bench=$!
    pids+=("$bench")
    sleep 4
    counters >"$out/before"
    ticks=$(awk '{print $14 + $15}' "/proc/$relay/stat")
    sleep "$D"
    counters >"$out/after"
    ticks=$(($(awk '{print $14 + $15}' "/proc/$relay/stat") - ticks))
    wait "$bench" || true
    kill "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true
    echo "== $load ($size B objects, --ack-every $ACK_EVERY${RELAY_ARGS:+, relay $RELAY_ARGS}), a second over $D s"
    join "$out/before" "$out/after" | awk -v d="$D" '{ sub(/^moq_edge_/, "", $1); printf "  %-32s %10.0f\n", $1, ($3 - $2) / d }'
    python3 -c 'import os, sys; print("  relay CPU ms a second        %10.0f" % (int(sys.argv[1]) / os.sysconf("SC_CLK_TCK") * 1e3 / int(sys.argv[2])))' "$ticks" "$D"
    grep -E "^(latency|integrity)" "$out/bench.txt" | sed 's/^/  /'
done
