"""`python -m bench.forward` on a small backlog: the target receives every event exactly
once, and the run reports both rates and the forwarder's CPU. Figures are not asserted
(they belong to the benchmark), only the checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]


def test_the_forwarding_benchmark_delivers_each_event_once(tmp_path: Path) -> None:
    result_path = tmp_path / "forward.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.forward", "--events", "300", "--max-in-flight", "16",
         "--ordering", "on", "--keys", "20", "--json", str(result_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    figures = orjson.loads(result_path.read_bytes())
    assert figures["checks_ok"] is True
    assert figures["distinct_delivered"] == 300 and figures["repeats"] == 0
    assert figures["forwarded_per_s"] > 0 and figures["baseline_posts_per_s"] > 0
    assert figures["forwarder_cpu_us_per_event"] > 0
    assert "checks ok" in result.stdout
