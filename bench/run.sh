#!/usr/bin/env bash
# `make bench`: builds the relay and moq-bench (release), starts the relay on the loopback,
# runs one moq-bench scenario against it and prints moq-bench's table. The relay runs on
# RELAY_CORES cores (pinned by the relay to CPUs 0..RELAY_CORES-1); moq-bench runs on the
# CPUs listed in GEN_CPUS (default: the CPUs after the relay's, or CPU 0 on a 1-CPU machine).
#
#   bench/run.sh                                   # the default fan-out below
#   bench/run.sh churn --subscribers 50 --hold-ms 500
#   RELAY_CORES=2 bench/run.sh fanout --tracks 8 --publishers 2 --subscribers 25 --threads 2
#
# Arguments after the scenario are moq-bench's (see `moq-bench <scenario> --help`); --relay and
# --relay-pid are added here. BIN=dir uses prebuilt binaries from dir instead of building;
# RELAY_ARGS="--congestion-control bbr2" passes more flags to the relay; TRANSPORT=webtransport
# runs moq-bench over WebTransport (https://…/bench, ALPN h3) instead of raw QUIC;
# TRANSPORT=websocket (ws://…/bench) and websocket-tls (wss://…/bench) over QMux over a
# WebSocket on the relay's TCP port.
set -euo pipefail
cd "$(dirname "$0")/.."

RELAY_CORES=${RELAY_CORES:-1}
PORT=${PORT:-4478}
METRICS=${METRICS:-9478}
NCPU=$(nproc)
if [[ -z ${GEN_CPUS:-} ]]; then
    if ((NCPU > RELAY_CORES)); then GEN_CPUS="${RELAY_CORES}-$((NCPU - 1))"; else GEN_CPUS=0; fi
fi
if [[ -z ${BIN:-} ]]; then
    cargo build --release --bin moq-edge --bin moq-bench
    BIN=target/release
fi
if (($# == 0)); then
    # The target scenario (bench/README.md, "Targets"): one publisher, 100 subscribers, 1200-byte objects.
    set -- fanout --subscribers 100 --object-size 1200 --rate 300 --duration 10 --warmup 2
fi
scenario=$1
shift

# shellcheck disable=SC2086 # RELAY_ARGS is a list of flags
"$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores "$RELAY_CORES" --metrics "127.0.0.1:$METRICS" ${RELAY_ARGS:-} \
    >/tmp/moq-bench-relay.log 2>&1 &
relay=$!
trap 'kill $relay 2>/dev/null || true; wait $relay 2>/dev/null || true' EXIT
sleep 1
if ! kill -0 $relay 2>/dev/null; then
    echo "bench/run.sh: the relay did not start; its log:" >&2
    cat /tmp/moq-bench-relay.log >&2
    exit 2
fi
echo "relay pid $relay on $RELAY_CORES core(s), moq-bench on CPUs $GEN_CPUS" >&2
# The relay's own view (its Prometheus endpoint), part-way through the run and at its end.
metrics() {
    echo "== relay metrics, $1 (curl http://127.0.0.1:$METRICS/metrics, totals over cores) ==" >&2
    curl -s "http://127.0.0.1:$METRICS/metrics" |
        grep -E '^moq_edge_(sessions|subscriptions|upstream_subscriptions|objects_in_total|objects_out_total|object_bytes_out_total|cache_bytes)\{core="all"\}|^moq_edge_resets_total|^moq_edge_relay_delay_(quantile_seconds|seconds_count)' >&2 ||
        echo "(no metrics: is curl installed?)" >&2
}
case ${TRANSPORT:-quic} in
quic) url="moqt://127.0.0.1:$PORT" ;;
webtransport) url="https://127.0.0.1:$PORT/bench" ;;
websocket) url="ws://127.0.0.1:$PORT/bench" ;;
websocket-tls) url="wss://127.0.0.1:$PORT/bench" ;;
*)
    echo "bench/run.sh: TRANSPORT is quic, webtransport, websocket or websocket-tls" >&2
    exit 2
    ;;
esac
taskset -c "$GEN_CPUS" "$BIN/moq-bench" "$scenario" --relay "$url" --relay-pid $relay "$@" &
bench=$!
sleep 6
kill -0 $bench 2>/dev/null && metrics "during the run"
rc=0
wait $bench || rc=$?
metrics "after the run"
exit $rc
