#!/usr/bin/env bash
# moq-edge side by side with the peer relays: each relay alone on CPU 0,
# moq-bench on CPU 1, the same moq-bench fan-out scenarios against each, one table: relay CPU
# seconds per delivered GB (lower is better), the ratio to moq-edge's in the same run,
# publish→receive latency p50/p99, lost objects, and "x floor": the relay's CPU per GB over
# the floor's, what the kernel and the crypto alone cost for the same packets on this machine
# (bench/floor: moq-floor's sender on the relay's first CPU, its sink on moq-bench's), measured
# in the same run before the relays at each load (FLOOR=0 skips it).
#
#   bench/peers.sh                 # every relay, every load below
#   RELAYS="moq-edge moq-relay-ietf" LOADS="100x300" bench/peers.sh
#
# The peers are installed from crates.io (pinned versions) into PEERS_DIR (default
# ~/.cache/moq-edge-peers), never into the repository: a first run compiles them (minutes).
# LOADS: SUBSCRIBERSxRATE or SUBSCRIBERSxRATExOBJECT_BYTES (1200 bytes when not given).
# DURATION / WARMUP: seconds measured, seconds before. BIN=dir uses prebuilt moq-edge and
# moq-bench. CORES=k (default 1) gives each relay CPUs 0..k-1 and k workers (moq-edge
# --cores k, moq-relay --runtime-workers k; moq-relay-ietf's runtime sizes itself to the CPUs
# it may use); GEN_CPUS (default: the CPUs after those) is moq-bench's taskset list, and
# BENCH_ARGS more moq-bench fanout arguments (e.g. "--tracks 16 --publishers 8 --threads 7"),
# EDGE_ARGS more moq-edge flags (e.g. "--congestion-control cubic").
# IETF_BIN / DEV_BIN name peer binaries built elsewhere (a machine without crates.io).
# bench/peers-scale.sh runs it for 1, 2, 4 and 8 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS_DIR=${PEERS_DIR:-$HOME/.cache/moq-edge-peers}
RELAYS=${RELAYS:-"moq-edge moq-relay-ietf moq-relay"}
LOADS=${LOADS:-"20x250 100x300 100x600 100x800 100x30x16384"}
DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
PORT=${PORT:-4481}
CORES=${CORES:-1}
RELAY_CPUS=0-$((CORES - 1))
GEN_CPUS=${GEN_CPUS:-$CORES-$(($(nproc) - 1))}
read -r -a bench_args <<<"${BENCH_ARGS:-}"
read -r -a edge_args <<<"${EDGE_ARGS:-}"
# Cloudflare's draft-16 relay, and moq-dev's relay (draft-22 among what it speaks).
IETF_VERSION=0.7.31
DEV_VERSION=0.17.10

if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    cargo build --release -p moq-edge-floor
    BIN=target/release
fi
install_peer() { # crate version [--locked]
    local root="$PEERS_DIR/$1-$2"
    if [[ ! -x $root/bin/$1 ]]; then
        echo "bench/peers.sh: installing $1 $2 into $root (once)" >&2
        CARGO_TARGET_DIR="$PEERS_DIR/target" cargo install "$1@$2" --root "$root" "${@:3}" >&2
    fi
    echo "$root/bin/$1"
}
for r in $RELAYS; do
    case $r in
    moq-relay-ietf) IETF=${IETF_BIN:-$(install_peer moq-relay-ietf "$IETF_VERSION" --locked)} ;;
    # Its lock file pins a yanked dependency: resolved afresh.
    moq-relay) DEV=${DEV_BIN:-$(install_peer moq-relay "$DEV_VERSION")} ;;
    esac
done

work=$(mktemp -d)
relay=
cleanup() {
    [[ -n $relay ]] && kill "$relay" 2>/dev/null && wait "$relay" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

start_relay() { # name → sets relay (pid) and draft
    case $1 in
    moq-edge)
        taskset -c "$RELAY_CPUS" "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores "$CORES" \
            --cert "$work/cert.pem" --key "$work/key.pem" "${edge_args[@]}" >"$work/relay.log" 2>&1 &
        draft=16 ;;
    moq-relay-ietf)
        taskset -c "$RELAY_CPUS" "$IETF" --bind "127.0.0.1:$PORT" --tls-cert "$work/cert.pem" \
            --tls-key "$work/key.pem" >"$work/relay.log" 2>&1 &
        draft=16 ;;
    moq-relay)
        # One worker per CPU it may use; anonymous publish and subscribe (its default asks
        # an auth server).
        taskset -c "$RELAY_CPUS" "$DEV" --listen "127.0.0.1:$PORT" --listen-tls-cert "$work/cert.pem" \
            --listen-tls-key "$work/key.pem" --runtime-workers "$CORES" --auth-public '**' \
            >"$work/relay.log" 2>&1 &
        draft=22 ;;
    *) echo "bench/peers.sh: unknown relay $1" >&2; exit 2 ;;
    esac
    relay=$!
    sleep 1
    if ! kill -0 "$relay" 2>/dev/null; then
        echo "bench/peers.sh: $1 did not start; its log:" >&2
        cat "$work/relay.log" >&2
        exit 2
    fi
}

for load in $LOADS; do
    IFS=x read -r subs rate size <<<"$load"
    size=${size:-1200}
    if [[ ${FLOOR:-1} != 0 ]]; then
        taskset -c "${RELAY_CPUS%%-*},${GEN_CPUS%%[-,]*}" "$BIN/moq-floor" --subscribers "$subs" --rate "$rate" \
            --object-size "$size" --duration "$DURATION" --warmup "$WARMUP" --json "$work/floor-$load.json" >/dev/null
    fi
    for r in $RELAYS; do
        start_relay "$r"
        taskset -c "$GEN_CPUS" "$BIN/moq-bench" fanout --relay "moqt://127.0.0.1:$PORT" --relay-pid "$relay" \
            --draft "$draft" --subscribers "$subs" --rate "$rate" --object-size "$size" "${bench_args[@]}" \
            --duration "$DURATION" --warmup "$WARMUP" --quiet --json "$work/$r-$load.json" \
            >/dev/null 2>&1 || echo "bench/peers.sh: $r at $load: not every object arrived intact (see lost)" >&2
        kill "$relay" 2>/dev/null || true
        wait "$relay" 2>/dev/null || true
        relay=
    done
done

python3 - "$work" "$RELAYS" "$LOADS" <<'PY'
import json, os, sys
work, relays, loads = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def row(r, load):
    path = f"{work}/{r}-{load}.json"
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    gb = d["delivered_bytes"] / 1e9
    cpu = d.get("relay_cpu_s") or 0
    # A relay that delivered nothing has no latency figures.
    lat = d.get("latency_us") or {}
    return (cpu / gb if gb else float("nan"), lat.get("p50"), lat.get("p99"), d["lost"], d["objects_per_s"])
print(f"{'load (subs x rate x bytes)':<27} {'relay':<15} {'CPU s/GB':>9} {'vs edge':>8} {'x floor':>8} {'p50 ms':>8} {'p99 ms':>8} {'delivered/s':>12} {'lost':>9}")
for load in loads:
    edge = row("moq-edge", load)
    floor = row("floor", load)
    if floor is not None:
        us = json.load(open(f"{work}/floor-{load}.json"))["us_per_packet"]
        print(f"{load:<27} {'floor':<15} {floor[0]:>9.2f} {'':>8} {1:>8.2f} {'':>8} {'':>8} {floor[4]:>12.0f} {floor[3]:>9}  ({us:.2f} us a packet)")
    for r in relays:
        x = row(r, load)
        if x is None:
            print(f"{load:<27} {r:<15} {'(no result)':>9}")
            continue
        ratio = x[0] / edge[0] if edge and edge[0] else float("nan")
        over = x[0] / floor[0] if floor and floor[0] else float("nan")
        p50 = (x[1] or 0) / 1e3
        p99 = (x[2] or 0) / 1e3
        print(f"{load:<27} {r:<15} {x[0]:>9.2f} {ratio:>8.2f} {over:>8.2f} {p50:>8.1f} {p99:>8.1f} {x[4]:>12.0f} {x[3]:>9}")
PY
