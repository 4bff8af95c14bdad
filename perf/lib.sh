# Shared part of perf/*.sh, sourced by each of them (not a script to run).
#
# Provides: option parsing (the common options, then the script's own through its
# script_option function, then moq-bench's scenario arguments), BIN/OUT resolution, starting
# the relay (optionally under a wrapper: valgrind, heaptrack) and stopping it from the EXIT
# trap, and run_bench, which runs moq-bench against the relay and calls the script's
# window_start / window_end functions (if defined) when moq-bench's measured window begins
# and ends.
#
# Common options (before the scenario):
#   --port N          UDP port of the relay on 127.0.0.1 (default: per script)
#   --cores N         relay executors (--cores of moq-edge; default 1, pinned to CPU 0)
#   --relay-args STR  more moq-edge flags, split on spaces, e.g. "--gso false --linger-ms 0"
#   --gen-cpus LIST   CPUs for moq-bench (taskset list; default: the CPUs after the relay's)
#   -h, --help        this script's usage
# Environment: BIN (binaries dir, default target/release), OUT (output dir, default perf/out);
# relative paths are taken from the directory the script was started in. PORT, RELAY_CORES,
# RELAY_ARGS and GEN_CPUS set the options' defaults (bench/run.sh reads the same names);
# START_TIMEOUT_S / STOP_TIMEOUT_S how long to wait for the relay to start / exit.

PERF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$PERF_DIR")
BIN=$(realpath -m "${BIN:-$ROOT/target/release}")
OUT=$(realpath -m "${OUT:-$PERF_DIR/out}")
ME=$(basename "$0")
TAG=${ME%.sh}        # prefix of the files every script writes: flamegraph-bench.json, ...
RELAY_CORES=${RELAY_CORES:-1}
RELAY_ARGS=${RELAY_ARGS:-}
GEN_CPUS=${GEN_CPUS:-}
PORT=${PORT:-${DEFAULT_PORT:-4530}}
START_TIMEOUT_S=${START_TIMEOUT_S:-15}
STOP_TIMEOUT_S=${STOP_TIMEOUT_S:-20}
RELAY_PID=          # the moq-edge process (the one moq-bench's --relay-pid gets)
WRAPPER_PID=        # the process started in the background ($!), a wrapper or moq-edge itself
SCENARIO_ARGS=()

die() {
    echo "$ME: $*" >&2
    exit 2
}
note() { echo "$ME: $*" >&2; }

usage() { # the script's header comment, up to `set -euo pipefail`
    sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' | sed -E 's/^# ?//'
}

# parse_args "$@": common options, then script_option NAME VALUE (defined by the script; it
# returns 0 when it took the option), then the moq-bench arguments (the scenario first). With
# no scenario, DEFAULT_SCENARIO (an array set by the script) is used.
parse_args() {
    while (($#)); do
        case $1 in
        -h | --help)
            usage
            exit 0
            ;;
        --port) PORT=${2:?--port needs a value}; shift 2 ;;
        --cores) RELAY_CORES=${2:?--cores needs a value}; shift 2 ;;
        --relay-args) RELAY_ARGS=${2?--relay-args needs a value}; shift 2 ;;
        --gen-cpus) GEN_CPUS=${2:?--gen-cpus needs a value}; shift 2 ;;
        --)
            shift
            break
            ;;
        -*)
            if declare -F script_option >/dev/null && (($# >= 2)) && script_option "$1" "$2"; then
                shift 2
            else
                die "unknown option $1 (see --help; moq-bench's arguments start with the scenario name)"
            fi
            ;;
        *) break ;;
        esac
    done
    if (($# == 0)); then
        SCENARIO_ARGS=("${DEFAULT_SCENARIO[@]}")
    else
        SCENARIO_ARGS=("$@")
    fi
    local a
    for a in "${SCENARIO_ARGS[@]}"; do
        case $a in
        --relay | --relay=* | --relay-pid | --relay-pid=* | --json | --json=*)
            die "do not pass $a: the script adds it" ;;
        --quiet) note "--quiet hides moq-bench's progress line, which marks the measured window; window figures will be missing" ;;
        esac
    done
    if [[ -z $GEN_CPUS ]]; then
        local n
        n=$(nproc)
        if ((n > RELAY_CORES)); then GEN_CPUS="$RELAY_CORES-$((n - 1))"; else GEN_CPUS=0; fi
    fi
    [[ -x $BIN/moq-edge && -x $BIN/moq-bench ]] ||
        die "no $BIN/moq-edge or $BIN/moq-bench: build them (cargo build --release --bin moq-edge --bin moq-bench) or set BIN"
    mkdir -p "$OUT"
}

# start_relay [WRAPPER...]: runs WRAPPER... moq-edge --listen 127.0.0.1:PORT --cores N
# RELAY_ARGS in the background (log: OUT/SCRIPT-relay.log), installs the EXIT trap, and
# waits until the relay prints its "serving" line. Sets WRAPPER_PID and RELAY_PID (the
# moq-edge process: the same as WRAPPER_PID unless the wrapper forks it, as heaptrack does).
start_relay() {
    local -a relay_args
    read -r -a relay_args <<<"$RELAY_ARGS"
    trap on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$@" "$BIN/moq-edge" --listen "127.0.0.1:$PORT" --cores "$RELAY_CORES" "${relay_args[@]}" \
        >"$OUT/$TAG-relay.log" 2>&1 &
    WRAPPER_PID=$!
    RELAY_PID=$WRAPPER_PID
    local deadline=$((SECONDS + START_TIMEOUT_S)) i=0
    until grep -q '^  serving ' "$OUT/$TAG-relay.log" 2>/dev/null; do
        if ! kill -0 "$WRAPPER_PID" 2>/dev/null; then
            echo "$ME: the relay exited at start; $OUT/$TAG-relay.log:" >&2
            tail -20 "$OUT/$TAG-relay.log" >&2
            exit 2
        fi
        ((SECONDS < deadline)) || die "the relay did not print its serving line within ${START_TIMEOUT_S}s (see $OUT/$TAG-relay.log)"
        # Under valgrind the start can stall the same way as the stop (see stop_relay) once
        # the executor waits in io_uring_enter: a datagram to its port wakes it.
        if ((++i % 5 == 0)); then poke; fi
        sleep 0.2
    done
    if (($#)); then
        # A wrapper that forks (heaptrack): the relay is its moq-edge child.
        local child
        child=$(pgrep -P "$WRAPPER_PID" -x moq-edge | head -1 || true)
        [[ -n $child ]] && RELAY_PID=$child
    fi
    local under='' w
    for w in "$@"; do # the wrapper's name, past `env VAR=value`
        [[ $w == env || $w == *=* ]] || { under=$w && break; }
    done
    note "relay pid $RELAY_PID on 127.0.0.1:$PORT, $RELAY_CORES core(s)${RELAY_ARGS:+, $RELAY_ARGS}${under:+, under $under}"
}

# stop_relay: SIGTERM (the relay closes its connections and exits), then waits for the
# wrapper. Under valgrind 3.19 an idle relay's executor thread sleeps in io_uring_enter while
# holding valgrind's thread lock, so the signal thread never runs until a packet wakes the
# executor: a junk UDP datagram is sent to the port every second while waiting.
stop_relay() {
    [[ -n $WRAPPER_PID ]] || return 0
    [[ -n $RELAY_PID ]] || RELAY_PID=$WRAPPER_PID
    if kill -0 "$RELAY_PID" 2>/dev/null; then
        kill -TERM "$RELAY_PID" 2>/dev/null || true
        local i
        for ((i = 0; i < STOP_TIMEOUT_S * 10; i++)); do
            kill -0 "$WRAPPER_PID" 2>/dev/null || break
            if ((i % 10 == 0)); then poke; fi
            sleep 0.1
        done
        if kill -0 "$WRAPPER_PID" 2>/dev/null; then
            note "the relay did not exit within ${STOP_TIMEOUT_S}s of SIGTERM; killing it (profiles written at exit are lost)"
            kill -KILL "$RELAY_PID" "$WRAPPER_PID" 2>/dev/null || true
        fi
    fi
    wait "$WRAPPER_PID" 2>/dev/null || true
    WRAPPER_PID=
}

# poke: one junk UDP datagram to the relay's port (the relay drops it: not QUIC).
poke() { { echo poke >"/dev/udp/127.0.0.1/$PORT"; } 2>/dev/null || true; }

on_exit() {
    local rc=$?
    if declare -F script_cleanup >/dev/null; then script_cleanup || true; fi
    stop_relay
    exit $rc
}

# run_bench: moq-bench SCENARIO_ARGS against the relay, on GEN_CPUS, with --relay-pid and
# --json OUT/SCRIPT-bench.json; its table goes to stdout and OUT/SCRIPT-bench.txt (SCRIPT:
# flamegraph, stat, callgrind, heap). moq-bench's stderr (the progress line, one "\r  12.0 s  measuring ..." per second) is read word by word: the first
# "measuring" calls window_start, the first "draining" after it (or the end of the run) calls
# window_end. Both run in a subshell of this script (state goes through files); they fire on
# moq-bench's one-second progress ticks, so they match the window when --warmup and
# --duration are whole seconds (the defaults are). Sets BENCH_RC (0 intact, 1 objects lost
# or reordered, 2 no run) and returns 0 unless the run could not be made.
run_bench() {
    rm -f "$OUT/$TAG-bench.json" "$OUT/.$TAG-window"
    note "moq-bench ${SCENARIO_ARGS[*]} (CPUs $GEN_CPUS)"
    BENCH_RC=0
    { taskset -c "$GEN_CPUS" "$BIN/moq-bench" "${SCENARIO_ARGS[@]}" --relay "moqt://127.0.0.1:$PORT" \
        --relay-pid "$RELAY_PID" --json "$OUT/$TAG-bench.json" 2>&1 1>&3 3>&- | watch_progress >&2; } 3>&1 |
        tee "$OUT/$TAG-bench.txt" || BENCH_RC=$?
    if [[ ! -s $OUT/$TAG-bench.json ]]; then
        die "moq-bench made no run (exit $BENCH_RC); see its output above and $OUT/$TAG-relay.log"
    fi
    if ((BENCH_RC != 0)); then
        note "moq-bench exit $BENCH_RC: the run was made but objects were lost, duplicated or reordered (see the integrity line)"
    fi
    return 0
}

watch_progress() {
    local word started=0 ended=0 t_start=0
    local sep=' '
    while IFS= read -r -d ' ' word || { sep= && [[ -n $word ]]; }; do
        printf '%s%s' "$word" "$sep"
        if ((!started)) && [[ $word == measuring ]]; then
            started=1
            t_start=$(date +%s.%N)
            if declare -F window_start >/dev/null; then window_start; fi
        elif ((started && !ended)) && [[ $word == draining ]]; then
            ended=1
            echo "$t_start $(date +%s.%N)" >"$OUT/.$TAG-window"
            if declare -F window_end >/dev/null; then window_end; fi
        fi
    done
    if ((started && !ended)); then
        echo "$t_start $(date +%s.%N)" >"$OUT/.$TAG-window"
        if declare -F window_end >/dev/null; then window_end; fi
    fi
    return 0
}

# window_s: seconds between the window_start and window_end calls ("" if they never ran).
window_s() {
    [[ -s $OUT/.$TAG-window ]] || return 0
    awk '{ printf "%.3f", $2 - $1 }' "$OUT/.$TAG-window"
}

# json KEY[.KEY...]: a value of OUT/SCRIPT-bench.json, "" when absent (python3, or jq).
json() {
    if command -v python3 >/dev/null; then
        python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$OUT/$TAG-bench.json" "$1"
    elif command -v jq >/dev/null; then
        jq -r --arg k "$1" 'getpath($k | split(".")) // empty' "$OUT/$TAG-bench.json"
    else
        die "reading $OUT/$TAG-bench.json needs python3 or jq"
    fi
}

# ratio NUMERATOR DENOMINATOR [DIGITS]
ratio() {
    awk -v a="$1" -v b="$2" -v d="${3:-3}" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.*f\n", d, a / b }'
}
