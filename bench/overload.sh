#!/usr/bin/env bash
# Overload, as an operator would see it: the relay on one core capped by a cgroup (cgroup v1
# cpu controller, `cpu.cfs_quota_us`; needs root) to QUOTA of a CPU, moq-bench on another
# CPU. First its capacity: the same fan-out at RATE objects/s per subscriber, then 1.2x more
# each run while it delivers everything with p99 under CAP_P99_MS (250: the quota alone stops
# the relay for 75 ms of every 100); capacity is what the last such run delivered. Then twice
# that offered, with the freshness budget on (the default, --max-lag-ms 2000) and off
# (--max-lag-ms 0). Prints per run: delivered objects/s, goodput (delivered / capacity),
# latency p50/p99 of what was delivered, subgroup streams the
# relay shed (its metrics: reset or not started, for its backlog bound or for lateness), lost
# objects, and the relay's peak RSS.
#
#   bench/overload.sh                          # QUOTA=0.25, RATE=150 (ladder start), 100 subscribers
#   QUOTA=0.5 RATE=300 bench/overload.sh --subscribers 50
#   CAPACITY=432 bench/overload.sh             # no ladder: one run at 432/s is the capacity
#                                              # (to compare builds at the same offered load)
#
# Arguments are moq-bench fanout's (after the defaults below). BIN=dir uses prebuilt binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
QUOTA=${QUOTA:-0.25}
RATE=${RATE:-150}
CAP_P99_MS=${CAP_P99_MS:-250}
CG=/sys/fs/cgroup/cpu/moq-overload-$$
if [[ ! -w /sys/fs/cgroup/cpu ]]; then
    echo "bench/overload.sh: needs a writable cgroup v1 cpu controller (/sys/fs/cgroup/cpu)" >&2
    exit 2
fi
if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    BIN=target/release
fi
mkdir "$CG"
echo 100000 >"$CG/cpu.cfs_period_us"
quota_us=$(awk "BEGIN { printf \"%d\", $QUOTA * 100000 }")
echo "$quota_us" >"$CG/cpu.cfs_quota_us"
out=$(mktemp -d)
relay=
cleanup() {
    [[ -n $relay ]] && kill "$relay" 2>/dev/null && wait "$relay" 2>/dev/null
    rmdir "$CG" 2>/dev/null || true
    [[ -n ${KEEP:-} ]] && cp -r "$out" "$KEEP"; rm -rf "$out"
}
trap cleanup EXIT
PORT=4479
MPORT=9479
run() { # name rate relay-flags...
    local name=$1 rate=$2
    shift 2
    taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --metrics "127.0.0.1:$MPORT" --cores 1 \
        "$@" >"$out/$name.log" 2>&1 &
    relay=$!
    echo "$relay" >"$CG/cgroup.procs"
    sleep 1
    taskset -c 1 "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$PORT" --relay-pid "$relay" \
        --subscribers 100 --object-size 1200 --rate "$rate" --duration 10 --warmup 2 \
        --json "$out/$name.json" --quiet "${BENCH_ARGS[@]}" >/dev/null 2>&1 || true
    curl -s "http://127.0.0.1:$MPORT/metrics" >"$out/$name.metrics" || true
    kill "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true
    relay=
}
BENCH_ARGS=("$@")
clean() { # whether run $1 delivered everything with p99 under CAP_P99_MS
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
sys.exit(0 if d["lost"] == 0 and (d["latency_us"]["p99"] or 0) <= float(sys.argv[2]) * 1e3 else 1)' \
        "$out/$1.json" "$CAP_P99_MS" 2>/dev/null
}
rate=$RATE
capacity=
ladder=()
steps=8
if [[ -n ${CAPACITY:-} ]]; then
    rate=$CAPACITY
    steps=1
fi
for _ in $(seq 1 "$steps"); do
    run "ladder-$rate" "$rate"
    ladder+=("ladder-$rate")
    clean "ladder-$rate" || break
    capacity=$rate
    rate=$(awk "BEGIN { printf \"%d\", $rate * 1.2 }")
done
[[ -n ${CAPACITY:-} ]] && capacity=$CAPACITY
if [[ -z $capacity ]]; then
    echo "bench/overload.sh: the relay does not carry RATE=$RATE cleanly; start lower" >&2
    exit 1
fi
double=$(awk "BEGIN { print $capacity * 2 }")
run overload "$double"
run overload-no-budget "$double" --max-lag-ms 0
python3 - "$out" "$QUOTA" "ladder-$capacity" "${ladder[@]}" <<'PY'
import json, sys
out, quota, cap_run, ladder = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
runs = [(n, f"{n.split('-')[1]}/s" + (" (capacity)" if n == cap_run else "")) for n in ladder]
runs += [("overload", "2x, max-lag 2000 ms"), ("overload-no-budget", "2x, max-lag off")]
data = {n: json.load(open(f"{out}/{n}.json")) for n, _ in runs}
def shed(name):  # the relay's resets_total over every reason, from its /metrics at the end
    total = 0
    try:
        for line in open(f"{out}/{name}.metrics"):
            if line.startswith("moq_edge_resets_total{") and 'core="all"' in line:
                total += int(float(line.split()[-1]))
    except OSError:
        return "?"
    return total
cap = data[cap_run]["objects_per_s"] or float("nan")
print(f"relay on one core capped at {quota} CPU (cgroup), 100 subscribers, 1200-byte objects")
print(f"{'run':<28} {'objects/s':>10} {'goodput':>8} {'p50 ms':>9} {'p99 ms':>9} {'shed':>7} {'lost':>9} {'RSS MiB':>8}")
for n, label in runs:
    d = data[n]
    lat = d["latency_us"]
    rss = (d.get("relay_rss_max_bytes") or 0) / 1048576
    print(f"{label:<28} {d['objects_per_s']:>10.0f} {d['objects_per_s'] / cap:>8.2f} "
          f"{(lat['p50'] or 0) / 1e3:>9.1f} {(lat['p99'] or 0) / 1e3:>9.1f} {shed(n):>7} "
          f"{d['lost']:>9} {rss:>8.1f}")
PY
