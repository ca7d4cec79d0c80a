"""`bench/console_lists.py` stays runnable: a small fill (100,000 events, 10,000 dead
letters) through the same SQL as the full one, every list page answered through the
console app, and each page's plans on an index. The latencies are printed but not
judged (`--no-latency-targets`): the exit status says only that every list page's
statements read along an index, and the overview's plans are checked by name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_lists_benchmark_runs_and_finds_every_page_indexed() -> None:
    argv = [sys.executable, "-m", "bench.console_lists", "--events", "100000"]
    argv += ["--dead-letters", "10000", "--requests", "5", "--no-latency-targets"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-3000:]
    assert "fill done" in out and "processed_webhooks: ~" in out
    for case in (
        "dead letters, first page (open)",
        "dead letters, deep cursor (90 %)",
        "events 30 days, first page",
        "events 30 days, deep cursor (90 %)",
        "events github 30 days, deep cursor",
        "overview",
    ):
        line = next((row for row in out.splitlines() if row.startswith(case)), None)
        assert line is not None, f"no figures for {case!r}"
        if case != "overview":  # a list page: its statements' verdict ends the line
            assert line.removesuffix("  SLOW").endswith("  index"), line
    assert "NO INDEX" not in out
    assert "not judged in this run" in out
    assert "Index Scan Backward using processed_webhooks_provider_received_idx" in out
