#!/usr/bin/env bash
# Overload, as an operator would see it: the relay on one core capped by a cgroup (cgroup v1
# cpu controller, `cpu.cfs_quota_us`; needs root) to QUOTA of a CPU, moq-bench on another
# CPU. Three runs of the same fan-out: at RATE objects/s per subscriber (about what the capped
# relay carries), at twice that with the freshness budget on (the default, --max-lag-ms 2000),
# and at twice that with it off (--max-lag-ms 0). Prints per run: delivered objects/s, goodput
# (delivered / delivered at RATE), latency p50/p99 of what was delivered, streams reset, lost
# objects, and the relay's peak RSS.
#
#   bench/overload.sh                          # QUOTA=0.25, RATE=150, 100 subscribers
#   QUOTA=0.5 RATE=300 bench/overload.sh --subscribers 50
#
# Arguments are moq-bench fanout's (after the defaults below). BIN=dir uses prebuilt binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
QUOTA=${QUOTA:-0.25}
RATE=${RATE:-150}
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
run() { # name rate relay-flags...
    local name=$1 rate=$2
    shift 2
    taskset -c 0 "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores 1 "$@" >"$out/$name.log" 2>&1 &
    relay=$!
    echo "$relay" >"$CG/cgroup.procs"
    sleep 1
    taskset -c 1 "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$PORT" --relay-pid "$relay" \
        --subscribers 100 --object-size 1200 --rate "$rate" --duration 10 --warmup 2 \
        --json "$out/$name.json" --quiet "${BENCH_ARGS[@]}" >/dev/null 2>&1 || true
    kill "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true
    relay=
}
BENCH_ARGS=("$@")
run capacity "$RATE"
double=$(awk "BEGIN { print $RATE * 2 }")
run overload "$double"
run overload-no-budget "$double" --max-lag-ms 0
python3 - "$out" "$QUOTA" <<'PY'
import json, sys
out, quota = sys.argv[1], sys.argv[2]
runs = [("capacity", "at RATE"), ("overload", "2x, max-lag 2000 ms"), ("overload-no-budget", "2x, max-lag off")]
data = {n: json.load(open(f"{out}/{n}.json")) for n, _ in runs}
cap = data["capacity"]["objects_per_s"] or float("nan")
print(f"relay on one core capped at {quota} CPU (cgroup), 100 subscribers, 1200-byte objects")
print(f"{'run':<28} {'objects/s':>10} {'goodput':>8} {'p50 ms':>9} {'p99 ms':>9} {'resets':>7} {'lost':>9} {'RSS MiB':>8}")
for n, label in runs:
    d = data[n]
    lat = d["latency_us"]
    rss = (d.get("relay_rss_max_bytes") or 0) / 1048576
    print(f"{label:<28} {d['objects_per_s']:>10.0f} {d['objects_per_s'] / cap:>8.2f} "
          f"{(lat['p50'] or 0) / 1e3:>9.1f} {(lat['p99'] or 0) / 1e3:>9.1f} {d['streams_reset']:>7} "
          f"{d['lost']:>9} {rss:>8.1f}")
PY
