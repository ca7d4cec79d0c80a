#!/usr/bin/env bash
# `make run`: the gateway with everything it feeds, in the foreground.
#   - gateway currency-stub on 127.0.0.1:8090 (demo rates; stands in for the currency-service)
#   - gateway settle (the settlement worker; opens the demo merchant's account first)
#   - gateway serve on 127.0.0.1:8080
# Ctrl-C stops all three.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=.venv/bin
CONFIG=${GATEWAY_CONFIG:-gateway.toml}
mkdir -p .data

pids=()
stop() {
    trap - INT TERM EXIT
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop INT TERM EXIT

"$BIN/gateway" currency-stub --port 8090 >>.data/currency-stub.log 2>&1 &
pids+=($!)
"$BIN/gateway" ledger --config "$CONFIG" open-account m_1 >/dev/null
"$BIN/gateway" settle --config "$CONFIG" 2>>.data/settle.log &
pids+=($!)
echo "run: currency-stub (log .data/currency-stub.log) and settle (log .data/settle.log) started"
"$BIN/gateway" serve --config "$CONFIG" &
pids+=($!)
wait "${pids[-1]}"
