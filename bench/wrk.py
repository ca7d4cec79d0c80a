"""Drive a server with Debian's `wrk` and the Lua script, and read what its done() printed."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.events import PATH, RequestSet

SCRIPT = Path(__file__).with_name("post_events.lua")
_MARKER = "BENCH_RESULT "
# Providers give up after about 5 s; an answer slower than that is an error.
TIMEOUT = "5s"


@dataclass(frozen=True)
class Load:
    """The load shape, identical for every server measured."""

    connections: int = 64
    threads: int = 2
    duration_s: int = 15
    count_answers: bool = True


@dataclass(frozen=True)
class WrkResult:
    """One wrk run, reduced to what the report needs (`raw` keeps everything)."""

    raw: dict[str, Any]
    requests: int
    duration_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    socket_errors: int
    timeouts: int
    statuses: dict[str, int]
    non_2xx: int | None  # None when answers were not counted (wrk counts only >= 400)
    accepted: int | None
    duplicate: int | None
    built_per_thread: list[int]
    wraps: int
    wrk_errors_status: int

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def built(self) -> int:
        return sum(self.built_per_thread)

    @property
    def unanswered(self) -> int:
        """Requests handed to wrk without an answer counted: those in flight when wrk
        stopped (at most one per connection), plus any lost to socket errors."""
        return max(0, self.built - self.requests)

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "duration_s": round(self.duration_s, 3),
            "rps": round(self.rps, 1),
            "latency_ms": {
                "p50": round(self.p50_ms, 3),
                "p90": round(self.p90_ms, 3),
                "p99": round(self.p99_ms, 3),
                "max": round(self.max_ms, 3),
            },
            "socket_errors": self.socket_errors,
            "timeouts": self.timeouts,
            "non_2xx": self.non_2xx,
            "statuses": self.statuses,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "sent": self.built,
            "unanswered": self.unanswered,
            "pool_wraps": self.wraps,
        }


def wrk_binary() -> str:
    found = shutil.which("wrk")
    if not found:
        raise RuntimeError("wrk not found: run `make setup` (scripts/setup.sh installs it)")
    return found


def run_wrk(
    base_url: str, requests: RequestSet, load: Load, limits: list[int] | None = None
) -> WrkResult:
    """Run wrk for `load.duration_s` with `requests`; `limits` replays only the first N
    requests of each thread's file (the duplicates pass)."""
    if requests.threads != load.threads:
        raise ValueError("one request file per wrk thread is needed")
    argv = [
        wrk_binary(),
        f"-t{load.threads}",
        f"-c{load.connections}",
        f"-d{load.duration_s}s",
        f"--timeout={TIMEOUT}",
        "-s",
        str(SCRIPT),
        base_url + PATH,
        "--",
        str(requests.prefix),
        str(requests.record_len),
        ",".join(str(n) for n in limits) if limits is not None else "all",
        "1" if load.count_answers else "0",
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=load.duration_s + 120, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith(_MARKER):
            return _parse(json.loads(line[len(_MARKER) :]), load.count_answers)
    raise RuntimeError(
        f"wrk printed no result (exit {done.returncode}):\n{done.stdout}{done.stderr}"
    )


def _parse(raw: dict[str, Any], counted: bool) -> WrkResult:
    errors = raw["errors"]
    latency = raw["latency_us"]
    threads = sorted(raw["threads"], key=lambda t: t["tid"])
    statuses: dict[str, int] = {}
    for thread in threads:
        for code, count in thread["statuses"].items():
            statuses[code] = statuses.get(code, 0) + int(count)
    non_2xx = sum(n for code, n in statuses.items() if not code.startswith("2"))
    return WrkResult(
        raw=raw,
        requests=int(raw["requests"]),
        duration_s=raw["duration_us"] / 1e6,
        p50_ms=latency["p50"] / 1000,
        p90_ms=latency["p90"] / 1000,
        p99_ms=latency["p99"] / 1000,
        max_ms=latency["max"] / 1000,
        socket_errors=int(errors["connect"] + errors["read"] + errors["write"]),
        timeouts=int(errors["timeout"]),
        statuses=statuses,
        non_2xx=non_2xx if counted else None,
        accepted=sum(int(t["accepted"]) for t in threads) if counted else None,
        duplicate=sum(int(t["duplicate"]) for t in threads) if counted else None,
        built_per_thread=[int(t["built"]) for t in threads],
        wraps=sum(int(t["wraps"]) for t in threads),
        wrk_errors_status=int(errors["status"]),
    )
