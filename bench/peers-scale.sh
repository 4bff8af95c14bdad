#!/usr/bin/env bash
# Scaling with cores, moq-edge beside moq-dev's moq-relay with one worker per
# core (and moq-relay-ietf with RELAYS), for a machine with 16 CPUs: each relay on CPUs 0..k-1
# for k in CORES_LIST, moq-bench on GEN_CPUS (8-15), the multi-track shape of bench/scale.sh
# (8 publishers, 16 tracks, 25 subscribers per track: 400 connections) at PER_CORE objects/s
# per track for each relay core, so the offered load grows with k. One bench/peers.sh table per
# core count, in OUT_DIR/cores-k.txt and on stdout.
#
#   bench/peers-scale.sh /tmp/peers-scale                 # ~3 minutes once the peers are built
#   CORES_LIST="1 2" GEN_CPUS=2-3 PER_CORE=100 bench/peers-scale.sh /tmp/out
#
# Without network access (the device machine) build the peers elsewhere and pass them:
#   DEV_BIN=path/to/moq-relay IETF_BIN=path/to/moq-relay-ietf BIN=dir bench/peers-scale.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/peers-scale}
mkdir -p "$OUT"
CORES_LIST=${CORES_LIST:-"1 2 4 8"}
PER_CORE=${PER_CORE:-400}
export GEN_CPUS=${GEN_CPUS:-8-15}
export RELAYS=${RELAYS:-"moq-edge moq-relay"}
export BENCH_ARGS=${BENCH_ARGS:-"--publishers 8 --tracks 16 --threads 7"}
export DURATION=${DURATION:-5}
for k in $CORES_LIST; do
    echo "== $k relay core(s): moq-bench fanout $BENCH_ARGS --subscribers 25 --rate $((PER_CORE * k))" | tee "$OUT/cores-$k.txt"
    CORES=$k LOADS="25x$((PER_CORE * k))" bench/peers.sh | tee -a "$OUT/cores-$k.txt"
done
