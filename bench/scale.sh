#!/usr/bin/env bash
# The multi-core run behind bench/README.md's scaling table, for a machine with 16 CPUs:
# the relay on CPUs 0..k-1 (it pins itself), moq-bench on CPUs 8-15.
#   1. load sweep, relay on 1 core: 1 publisher → 100 subscribers, 1200 B, 250..4000 objects/s
#      (25k..400k objects/s delivered), and draft-22 at 1000 objects/s
#   2. core scaling, 8 publishers, 16 tracks, 25 subscribers per track (400 connections):
#      "fit-k": 400·k objects/s per track (160k·k delivered per second, within what k cores
#      carry); "over-k": 4000 objects/s per track (1.6M/s, 15 Gbit/s offered, overload)
#   3. 2000 subscriber connections on one relay core (RSS growth); churn; late join
# moq-bench uses 7 subscriber threads plus its publisher thread on the 8 generator CPUs.
# Usage: bench/scale.sh BIN_DIR OUT_DIR   (BIN_DIR holds moq-edge and moq-bench)
# Writes OUT_DIR/scale.log (every table) and OUT_DIR/results.jsonl (one JSON object per run).
set -uo pipefail
BIN=$1
OUT=$2
GEN=${GEN:-8-15}
PORT=4490
exec > >(tee -a "$OUT/scale.log") 2>&1
echo "== $(date -u) on $(nproc) CPUs; $(uname -sr)"

run() { # name relay-cores moq-bench-args...
    local name=$1 cores=$2
    shift 2
    PORT=$((PORT + 1))
    "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores "$cores" >"/tmp/relay-$name.log" 2>&1 &
    local relay=$!
    sleep 1
    if ! kill -0 $relay 2>/dev/null; then
        echo "!! $name: the relay did not start"
        tail -20 "/tmp/relay-$name.log"
        return 1
    fi
    echo "-- $name: relay on $cores core(s); moq-bench $*"
    timeout 90 taskset -c "$GEN" "$BIN/moq-bench" "$@" --relay "moqt://127.0.0.1:$PORT" \
        --relay-pid $relay --quiet --json "/tmp/$name.json"
    echo "   moq-bench exit $?"
    kill $relay
    wait $relay 2>/dev/null
    if [[ -f /tmp/$name.json ]]; then
        tr -d '\n ' <"/tmp/$name.json" | sed "s/^{/{\"run\":\"$name\",\"relay_cores\":$cores,/" >>"$OUT/results.jsonl"
        echo >>"$OUT/results.jsonl"
    fi
}

run probe 1 fanout --subscribers 2 --rate 50 --duration 1 --warmup 0.5 || exit 1
for rate in 250 500 1000 2000 3000 4000; do
    run "sweep-$rate" 1 fanout --subscribers 100 --rate $rate --threads 7 --duration 5 --warmup 2
done
run sweep-d22-1000 1 fanout --draft 22 --subscribers 100 --rate 1000 --threads 7 --duration 5 --warmup 2
for cores in 1 2 4 8; do
    run "fit-$cores" $cores fanout --publishers 8 --tracks 16 --subscribers 25 --rate $((400 * cores)) \
        --threads 7 --duration 5 --warmup 2
done
for cores in 1 2 4 8; do
    run "over-$cores" $cores fanout --publishers 8 --tracks 16 --subscribers 25 --rate 4000 \
        --threads 7 --duration 5 --warmup 2
done
run sessions-2000 1 fanout --subscribers 2000 --rate 20 --threads 7 --duration 5 --warmup 2
run churn 1 churn --subscribers 50 --tracks 2 --publishers 2 --rate 100 --hold-ms 500 --threads 7 --duration 5 --warmup 1
run late-join 1 late-join --subscribers 100 --rate 100 --threads 7 --duration 5 --warmup 1
echo "== done $(date -u)"
