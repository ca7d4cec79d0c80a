"""`python -m bench.confirm` on a small backlog with a short outage: every webhook is
confirmed once, each payment recorded paid once, nothing parked, each payment fetched
once, and the outage's figures are reported. Figures are not asserted (they belong to
the benchmark), only the checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 200


def test_the_confirm_benchmark_confirms_each_webhook_once_through_an_outage(
    tmp_path: Path,
) -> None:
    result_path = tmp_path / "confirm.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench.confirm", "--events", str(EVENTS), "--outage-s", "3",
         "--timeout-s", "120", "--json", str(result_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    figures = orjson.loads(result_path.read_bytes())
    assert figures["checks_ok"] is True
    checks = figures["checks"]
    assert checks["confirmed_rows"] == EVENTS and checks["rows_not_confirmed"] == 0
    assert checks["confirmed_events"] == EVENTS and checks["paid_events"] == EVENTS
    assert checks["dead_letters"] == 0
    assert checks["payments_fetched"] == EVENTS and checks["repeats"] == 0
    # The stand-in was down at first: it answered 503s, then each payment once.
    assert checks["answers_by_status"]["200"] == EVENTS
    assert checks["answers_by_status"].get("503", 0) > 0
    outage = figures["outage"]
    assert outage["pending_at_outage_end"] == EVENTS
    assert outage["rss_mib_at_outage_start"] > 0 and outage["rss_mib_at_end"] > 0
    assert outage["drained_s_after_api_back"] > 0
    assert figures["baseline_fetches_per_s"] > 0 and figures["confirm_cpu_us_per_event"] > 0
    assert "checks ok" in result.stdout
