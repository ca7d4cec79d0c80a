#!/usr/bin/env bash
# `make run`: the gateway with everything it feeds, in the foreground.
#   - gateway currency-stub on 127.0.0.1:8090 (demo rates; stands in for the
#     currency-service at currency.url)
#   - gateway settle (the settlement worker; opens the demo merchant's account first)
#   - gateway serve on 127.0.0.1:8080 (http.port)
#   - gateway console on 127.0.0.1:8070 (console.port), with a fresh admin token `demo`
#     printed at start (valid one day), and gateway dlq run-jobs, which runs the replays
#     planned in it
# Ctrl-C stops them all. If one of them exits, the others are stopped, and the one that
# died is named with the end of its log (exit status 1). Before anything starts, every
# port they would listen on is checked: a taken one is named, with its setting, in one
# line.
#
# Environment (the defaults are what `make run` uses):
#   GATEWAY_CONFIG    the config file (default gateway.toml; ports come from it)
#   GATEWAY_BIN       directory of the `gateway` and `python` to run (default .venv/bin)
#   GATEWAY_RUN_LOGS  directory of the logs (default .data)
#   GATEWAY_RUN_MERCHANT  the demo merchant whose account is opened (default m_1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${GATEWAY_BIN:-.venv/bin}
CONFIG=${GATEWAY_CONFIG:-gateway.toml}
LOGS=${GATEWAY_RUN_LOGS:-.data}
MERCHANT=${GATEWAY_RUN_MERCHANT:-m_1}
TAIL_LINES=20
mkdir -p "$LOGS"

# 1. The config loads and no port is taken (one line naming the port and setting if so).
addresses=$("$BIN/python" scripts/run_preflight.py "$CONFIG") || exit $?
read -r stub_host stub_port console_address <<<"$addresses"

# 2. Start them, each with a log of its own (serve's is also on the terminal).
names=()
pids=()
stopping=0
stop() {
    stopping=1
    trap - INT TERM EXIT
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait "${pids[@]}" 2>/dev/null || true
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

start() { # start NAME COMMAND...: run in the background, logging to $LOGS/NAME.log
    local name=$1
    shift
    "$@" >>"$LOGS/$name.log" 2>&1 &
    names+=("$name")
    pids+=($!)
}

start currency-stub "$BIN/gateway" currency-stub --host "$stub_host" --port "$stub_port"
"$BIN/gateway" ledger open-account "$MERCHANT" --config "$CONFIG" >/dev/null
start settle "$BIN/gateway" settle --config "$CONFIG"
echo "run: currency-stub (log $LOGS/currency-stub.log) and settle (log $LOGS/settle.log) started"
# The demo's console token: the previous run's is revoked, so only one is ever live.
"$BIN/gateway" console token revoke demo --config "$CONFIG" >/dev/null 2>&1 || true
token=$("$BIN/gateway" console token create --name demo --role admin --expires 1d --config "$CONFIG")
start console "$BIN/gateway" console --config "$CONFIG"
start run-jobs "$BIN/gateway" dlq run-jobs --config "$CONFIG"
echo "run: console on http://$console_address/console/ (log $LOGS/console.log), log in with: $token"
"$BIN/gateway" serve --config "$CONFIG" 2> >(tee -a "$LOGS/serve.log" >&2) &
names+=(serve)
pids+=($!)

# 3. Wait for the first to exit; then stop the others and say which one it was.
status=0
wait -n "${pids[@]}" || status=$?
((stopping == 0)) || exit "$status"
dead=unknown
for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
        dead=${names[$i]}
        break
    fi
done
stop
{
    echo "run: $dead exited (status $status); stopped the others"
    if [[ -s "$LOGS/$dead.log" ]]; then
        echo "run: the last lines of $LOGS/$dead.log:"
        tail -n "$TAIL_LINES" "$LOGS/$dead.log" | sed 's/^/    /'
    fi
} >&2
exit 1
