"""Forwarding throughput: how fast `gateway forward` delivers a backlog of accepted
events to an HTTP target that answers at once, and the forwarder's CPU per event
(figures: docs/performance.md).

One run: a fresh database and private nats-server, a backlog of Stripe payment events
recorded and published as the gateway does (`bench.settlement_backlog`), and a target
in a process of its own (`bench.forward_receiver`) that answers every POST `200` and
counts deliveries by `webhook-id`. Then, in the same run and against the same target:

1. the baseline: this process POSTs the same bodies with the same number in flight
   through the forwarder's own HTTP adapter (`adapters.http_target`), nothing else (no
   stream, no database, no signature): what the sending alone costs and allows;
2. `gateway forward --name bench` as a process of its own, from its start until the
   target has every event. Its CPU is read from /proc at the end.

Reported: events per second of both, their ratio, and the forwarder's CPU per event.
Checked: the target received each event exactly once (distinct `webhook-id`s equal to
the events, no repeat).

    .venv/bin/python -m bench.forward [--events N] [--max-in-flight N]
        [--ordering on|off] [--keys N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.procs import cpu_s
from bench.servers import ROOT, fresh_backend, write_gateway_config
from bench.settlement_backlog import (
    ORDER_KEY_POINTER,
    load_backlog,
    plan_payments,
    stripe_events,
)
from gateway import settings as settings_mod
from gateway.adapters.http_target import HttpTarget
from tests.support.services import free_port, wait_for_port

GATEWAY = [sys.executable, "-m", "gateway"]
SECRET_ENV = "BENCH_FORWARD_SECRET"
SECRET = "whsec_" + "YmVuY2gtZm9yd2FyZC1zZWNyZXQtMTIzNDU2Nzg5MA=="  # a benchmark-only value


def _config(backend: Any, workdir: Path, target_url: str, args: argparse.Namespace) -> Path:
    settings = {
        "ordering": {"enabled": args.ordering == "on"},
        "providers": {"stripe": {"order_key": [ORDER_KEY_POINTER]}},
        "forward": {
            "bench": {
                "url": target_url,
                "secret_env": SECRET_ENV,
                "allow_private": True,
                "start": "start",
                "max_in_flight": args.max_in_flight,
                "ordered": args.ordering == "on",
            }
        },
    }
    return write_gateway_config(workdir / "gateway.toml", backend, free_port(), settings)


async def _count(client: httpx.AsyncClient, url: str) -> dict[str, int]:
    answer = await client.get(url)
    return dict(orjson.loads(answer.content))


async def _baseline(url: str, bodies: list[bytes], in_flight: int) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) to POST every body once through the
    forwarder's own HTTP adapter, with as many in flight: the sending alone."""
    target = HttpTarget(url, timeout_s=30, verify_tls=True, max_connections=in_flight)
    gate = asyncio.Semaphore(in_flight)
    started, cpu0 = time.perf_counter(), time.process_time()
    try:

        async def post(i: int, body: bytes) -> None:
            async with gate:
                headers = {"webhook-id": f"base_{i}", "content-type": "application/json"}
                attempted = await target.post(body, headers)
                if attempted.answer.status != 200:
                    raise RuntimeError(f"the target answered {attempted.answer}")

        await asyncio.gather(*(post(i, b) for i, b in enumerate(bodies)))
    finally:
        await target.close()
    return time.perf_counter() - started, time.process_time() - cpu0


async def _wait_delivered(
    count_url: str, events: int, timeout_s: float
) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=5) as client:
        while True:
            seen = await _count(client, count_url)
            if seen["distinct"] >= events:
                return time.perf_counter() - started, seen
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"the forwarder delivered {seen} of {events} in {timeout_s} s")
            await asyncio.sleep(0.05)


def forward_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """One run; the figures and the checks."""
    with fresh_backend() as backend, tempfile.TemporaryDirectory(prefix="bench-fwd-") as tmp:
        workdir = Path(tmp)
        port = free_port()
        receiver = subprocess.Popen(
            [sys.executable, "-m", "bench.forward_receiver", "--port", str(port)], cwd=ROOT
        )
        try:
            wait_for_port(port, timeout_s=15)
            target = f"http://127.0.0.1:{port}/webhooks"
            config = _config(backend, workdir, target, args)
            settings = settings_mod.load(config, env={**os.environ, SECRET_ENV: SECRET})
            payments = plan_payments(args.events, 0.0)
            published = asyncio.run(load_backlog(settings, payments, args.keys))
            bodies = [e.body for e in stripe_events(settings, payments, args.keys)]
            base_s, base_cpu_s = asyncio.run(_baseline(target, bodies, args.max_in_flight))
            count_url = f"http://127.0.0.1:{port}/count"
            forwarded_s, forwarder_cpu_s, seen = _run_forwarder(
                config, count_url, len(bodies) + args.events, args
            )
        finally:
            receiver.send_signal(signal.SIGTERM)
            receiver.wait(timeout=30)
    # The baseline's own deliveries are counted too: take them out.
    forwarded_posts = seen["posts"] - len(bodies)
    figures = {
        "events": args.events,
        "published": published,
        "max_in_flight": args.max_in_flight,
        "ordering": args.ordering,
        "baseline_posts_per_s": round(len(bodies) / base_s, 1),
        "baseline_cpu_us_per_post": round(1e6 * base_cpu_s / len(bodies), 1),
        "forwarded_per_s": round(args.events / forwarded_s, 1),
        "forwarder_cpu_us_per_event": round(1e6 * forwarder_cpu_s / args.events, 1),
        "ratio_to_baseline": round((args.events / forwarded_s) / (len(bodies) / base_s), 3),
        "distinct_delivered": seen["distinct"] - len(bodies),
        "repeats": forwarded_posts - (seen["distinct"] - len(bodies)),
    }
    figures["checks_ok"] = figures["distinct_delivered"] == args.events and figures["repeats"] == 0
    return figures


def _run_forwarder(
    config: Path, count_url: str, distinct: int, args: argparse.Namespace
) -> tuple[float, float, dict[str, int]]:
    """Start the forwarder; (seconds until the target has seen `distinct` delivery ids,
    the forwarder's CPU seconds, the target's counts)."""
    env = {SECRET_ENV: SECRET, "PATH": "/usr/bin:/bin", "GATEWAY_LOG_LEVEL": "WARNING"}
    forwarder = subprocess.Popen(
        [*GATEWAY, "forward", "--config", str(config), "--name", "bench", "--output", "quiet"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        waited_s, seen = asyncio.run(_wait_delivered(count_url, distinct, args.timeout_s))
        used_s = cpu_s(forwarder.pid)
    finally:
        forwarder.send_signal(signal.SIGTERM)
        forwarder.wait(timeout=30)
    return waited_s, used_s, seen


def forwarding_run(events: int) -> dict[str, Any]:
    """The figures of one run with the defaults (what `make bench` reports)."""
    return forward_benchmark(parser().parse_args(["--events", str(events)]))


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="backlog size")
    parser.add_argument("--max-in-flight", type=int, default=64, help="attempts at once")
    parser.add_argument("--ordering", choices=["on", "off"], default="off")
    parser.add_argument("--keys", type=int, default=1000, help="ordering keys (with --ordering on)")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    figures = forward_benchmark(args)
    print(
        f"baseline {figures['baseline_posts_per_s']:,.0f} POST/s; forwarded "
        f"{figures['forwarded_per_s']:,.0f} events/s ({figures['ratio_to_baseline']:.2f} of "
        f"the baseline), forwarder {figures['forwarder_cpu_us_per_event']} µs CPU/event; "
        f"checks {'ok' if figures['checks_ok'] else 'FAILED'}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if figures["checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
