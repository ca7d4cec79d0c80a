"""What the metrics cost a request: the two calls every ingestion request makes
(`webhooks_total.inc(provider, outcome)` and `request_seconds.observe(...)`), timed
in-process, single-process and in multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`, as the
workers of `gateway serve --workers N` run).

    python -m bench.metrics_cost [--requests 200000] [--repeat 5]

Each mode runs in a fresh interpreter (the mode is chosen when prometheus_client is
first imported); the best of `--repeat` runs is reported, in µs per request.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

#: Outcomes and latencies spread over labels and buckets as real traffic would.
_OUTCOMES = ("accepted", "accepted", "accepted", "duplicate", "signature_mismatch")
_LATENCIES_S = (0.0004, 0.003, 0.007, 0.012, 0.03)
CHILD = [sys.executable, "-m", "bench.metrics_cost", "--child"]


def measure(requests: int, repeat: int) -> float:
    """Best µs per request of `repeat` runs of `requests` inc + observe pairs."""
    from gateway.metrics import Metrics

    metrics = Metrics()
    webhooks, latency = metrics.webhooks_total, metrics.request_seconds
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for i in range(requests):
            webhooks.inc(provider="stripe", outcome=_OUTCOMES[i % 5])
            latency.observe(_LATENCIES_S[i % 5])
        best = min(best, (time.perf_counter() - started) / requests * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.requests, args.repeat)))
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="metrics-cost-") as shared:
        modes = {"single-process": {}, "multiprocess": {"PROMETHEUS_MULTIPROC_DIR": shared}}
        for mode, extra in modes.items():
            env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
            out = subprocess.run(
                [*CHILD, "--requests", str(args.requests), "--repeat", str(args.repeat)],
                env={**env, **extra},
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[mode] = json.loads(out)
    for mode, us in results.items():
        print(f"{mode:15} {us:6.2f} µs per request (inc + observe)")


if __name__ == "__main__":
    main()
