"""`make bench` stays runnable: its self-check drives every server with wrk, checks the
rows against the answers and the stream against the rows, runs serve and settle
together end to end (a short burst and a short paced load) and checks that the ledger
holds exactly the accepted payments, and drains a small settlement backlog. Figures are
not asserted (they belong to `make bench`), only that the harness ran and its
correctness checks held."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_self_check_passes(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    argv = [sys.executable, "-m", "bench.run", "--quick", "--duration", "2"]
    argv += ["--settle-events", "500", "--output", str(output)]
    done = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "self-check passed" in done.stdout
    results = json.loads(output.read_text())
    assert set(results["runs"]) == {"bare", "batching", "no_batching", "end_to_end"}
    for run in ("batching", "no_batching", "end_to_end"):
        checks = results["runs"][run]["checks"]
        assert checks and all(c["ok"] for c in checks), checks
        assert results["runs"][run]["new"]["accepted"] > 0
    e2e = results["runs"]["end_to_end"]
    checks = {c["check"] for c in e2e["checks"]}
    assert {"one stream message per row", "ledger balanced"} <= checks
    burst, paced = e2e["burst"], e2e["paced"]
    assert burst["settled_per_s"] > 0 and burst["ledger_lag_after_load_s"] is not None
    assert burst["accepted_over_bare"] > 0  # (a) ran before it, in the same run
    assert paced["settled"] == paced["events"] > 0
    assert paced["webhook_to_settled_ms"]["p99"] > 0
    reported = {t["name"]: t["status"] for t in results["targets"]}
    assert reported["(e) settled/s / accepted/s, burst"] in ("pass", "FAIL")
    assert reported["(e) webhook -> settled p99 at half capacity (ms)"] in ("pass", "FAIL")
    numbering = results["numbering"]
    assert numbering["us_per_event"]["unkeyed"] > 0
    assert numbering["most_over_unkeyed_us"] is not None
    assert reported["ingest numbering: keyed over unkeyed, PostgreSQL CPU (µs)"] in ("pass", "FAIL")
    assert "(e) serve + settle, end to end: stage" in done.stdout
    settlement = results["settlement"]
    assert settlement["events"] == 500
    assert all(c["ok"] for c in settlement["checks"]), settlement["checks"]


def test_bench_self_check_with_tracing_exports_to_its_own_sink(tmp_path: Path) -> None:
    """`--tracing`: (b) runs with traces on at ratio 1.0, exported to the benchmark's own
    OTLP/HTTP sink, and its checks still hold (one short run: about 10 s)."""
    output = tmp_path / "results.json"
    argv = [sys.executable, "-m", "bench.run", "--quick", "--tracing", "--duration", "1"]
    argv += ["--runs", "batching", "--settle-events", "0", "--output", str(output)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "self-check passed" in done.stdout
    results = json.loads(output.read_text())
    assert results["runs"]["batching"]["settings"]["tracing"]["sample_ratio"] == 1.0
    sink = results["tracing"]["sink"]
    assert sink["requests"] > 0 and sink["bytes"] > 0 and sink["refused"] == 0
    assert all(c["ok"] for c in results["runs"]["batching"]["checks"])


def test_bench_self_check_with_prefill_and_retention(tmp_path: Path) -> None:
    """`--prefill` and `--retention-rows` (issue 14): (b) runs again on a prefilled table,
    and once more while `gateway retention run` empties expired payloads; the prefilled
    rows stay out of the outbox and the stream, retention empties exactly them, and the
    new figures are in the results (a short run: about 30 s)."""
    output = tmp_path / "results.json"
    argv = [sys.executable, "-m", "bench.run", "--quick", "--duration", "1"]
    argv += ["--runs", "batching,prefilled,retention", "--prefill", "20000"]
    argv += ["--retention-rows", "20000", "--settle-events", "0", "--output", str(output)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "self-check passed" in done.stdout
    results = json.loads(output.read_text())
    runs = results["runs"]
    assert set(runs) == {"batching", "prefilled", "retention"}
    for run in runs.values():
        assert all(c["ok"] for c in run["checks"]), run["checks"]
    assert runs["batching"]["new"]["postgres_cpu_us_per_new_row"] > 0
    prefilled = runs["prefilled"]
    assert prefilled["prefill"]["rows"] == 20_000
    assert prefilled["storage"]["after_passes"]["rows"] > 20_000
    retention = runs["retention"]
    assert retention["retention"]["finished"]
    assert retention["retention"]["emptied_total"] == 20_000
    assert retention["during_retention"]["latency_ms"]["p99"] > 0
    sizes = retention["storage"]
    assert sizes["after_vacuum_full"]["rows"] == 20_000
    assert sizes["after_vacuum_full"]["bytes_per_row"] < sizes["after_prefill"]["bytes_per_row"]
    ratios = results["ratios"]
    assert ratios["prefilled_over_empty_new"] and ratios["retention_p99_over_without"]
    reported = {t["name"]: t for t in results["targets"]}
    assert reported["(b) new events, 20,000 rows stored / empty table"]["status"] != "n/a"
