"""The facade over prometheus_client: the contract's names, types, labels and buckets,
per-process reads for tests and the in-process alerts, and how the processes of one run
combine (each child process below is a worker with the run's shared directory)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.metrics import MULTIPROC_ENV, Counter, Metrics
from gateway.metrics.families import REQUEST_BUCKETS_S
from gateway.metrics.shared import forget_dead_processes

#: The contract (design.md, README): name -> (type, label names).
CONTRACT = {
    "gateway_webhooks_total": ("counter", ("outcome", "provider")),
    "gateway_request_seconds": ("histogram", ()),
    "gateway_event_loop_lag_seconds": ("histogram", ()),
    "gateway_http_refused_total": ("counter", ("reason",)),
    "gateway_duplicates_from_memory_total": ("counter", ()),
    "gateway_outbox_pending": ("gauge", ()),
    "gateway_outbox_lag_seconds": ("gauge", ()),
    "gateway_published_total": ("counter", ("path",)),
    "gateway_retries_total": ("counter", ("subject",)),
    "gateway_dlq_total": ("counter", ("error_class", "stage")),
    "gateway_dlq_auto_replays_total": ("counter", ("error_class", "outcome")),
    "gateway_settlements_total": ("counter", ("outcome",)),
    "gateway_settlement_unmapped_total": ("counter", ("provider", "type")),
    "gateway_ledger_negative_merchants": ("gauge", ("currency",)),
    "gateway_critical_total": ("counter", ("reason",)),
    "gateway_dlq_unresolved": ("gauge", ()),
    "gateway_dlq_oldest_unresolved_seconds": ("gauge", ()),
    "gateway_dependency_up": ("gauge", ("dependency",)),
    "gateway_order_held_keys": ("gauge", ()),
    "gateway_order_oldest_hold_seconds": ("gauge", ()),
    "gateway_order_gap_waits_total": ("counter", ("provider",)),
    "gateway_order_blocked_parked_total": ("counter", ()),
    "gateway_order_deferred_total": ("counter", ()),
    "gateway_retention_removed_total": ("counter", ("table", "what")),
    "gateway_retention_oldest_payload_seconds": ("gauge", ()),
    "gateway_storage_rows": ("gauge", ("table",)),
    "gateway_storage_bytes": ("gauge", ("table",)),
    "gateway_backfill_events_total": ("counter", ("outcome", "provider")),
    "gateway_backfill_last_complete_timestamp_seconds": ("gauge", ("provider",)),
    "gateway_backfill_pages_skipped_total": ("counter", ("provider",)),
    "gateway_database_durability": ("gauge", ("state",)),
    "gateway_database_synchronous_standbys": ("gauge", ()),
    "gateway_forward_attempts_total": ("counter", ("destination", "outcome")),
    "gateway_forward_latency_seconds": ("histogram", ("destination",)),
    "gateway_forward_lag": ("gauge", ("destination",)),
    "gateway_confirm_fetches_total": ("counter", ("outcome", "provider")),
    "gateway_confirm_fetch_seconds": ("histogram", ("provider",)),
    "gateway_confirm_pending": ("gauge", ("provider",)),
    "gateway_confirm_oldest_pending_seconds": ("gauge", ("provider",)),
    "gateway_forward_oldest_undelivered_seconds": ("gauge", ("destination",)),
}


def test_every_contract_name_keeps_its_type_and_labels() -> None:
    """Dashboards and alert rules rely on these: the rendered TYPE lines say so."""
    metrics = Metrics()
    text = metrics.render()
    for name, (kind, _) in CONTRACT.items():
        assert f"# TYPE {name} {kind}" in text
    declared = {m.name: m.labelnames for m in vars(metrics).values() if isinstance(m, Counter)}
    assert declared == {name: labels for name, (_, labels) in CONTRACT.items()}


def test_the_request_histogram_keeps_its_buckets() -> None:
    metrics = Metrics()
    metrics.request_seconds.observe(0.003)
    bounds = [
        line.split('le="')[1].split('"')[0]
        for line in metrics.render().splitlines()
        if line.startswith("gateway_request_seconds_bucket")
    ]
    assert [float(b) for b in bounds] == [*REQUEST_BUCKETS_S, float("inf")]
    assert REQUEST_BUCKETS_S[0] == 0.001 and REQUEST_BUCKETS_S[-1] == 10.0


def test_get_and_values_read_this_process_whatever_the_keyword_order() -> None:
    metrics = Metrics()
    metrics.webhooks_total.inc(provider="stripe", outcome="accepted")
    metrics.webhooks_total.inc(outcome="accepted", provider="stripe")
    metrics.webhooks_total.inc(3, provider="paddle", outcome="duplicate")
    assert metrics.webhooks_total.get(outcome="accepted", provider="stripe") == 2
    assert metrics.webhooks_total.get(outcome="accepted", provider="nosuch") == 0
    assert metrics.webhooks_total.values == {
        (("outcome", "accepted"), ("provider", "stripe")): 2,
        (("outcome", "duplicate"), ("provider", "paddle")): 3,
    }
    metrics.outbox_pending.set(7)
    assert metrics.outbox_pending.get() == 7


def test_a_label_the_metric_does_not_have_is_refused() -> None:
    metrics = Metrics()
    with pytest.raises(ValueError):
        metrics.webhooks_total.inc(provider="stripe")
    with pytest.raises(ValueError):
        metrics.outbox_pending.set(1, provider="stripe")


WORKER = textwrap.dedent(
    """
    import sys
    from gateway.metrics import Metrics
    m = Metrics()
    m.webhooks_total.inc(int(sys.argv[1]), provider="stripe", outcome="accepted")
    m.request_seconds.observe(0.002)
    m.outbox_pending.set(float(sys.argv[2]))
    if sys.argv[3] == "close":
        m.close()
    if sys.argv[3] == "stay":  # alive until told to go
        print("set", flush=True)
        sys.stdin.read()
    """
)
SCRAPE = "from gateway.metrics import Metrics; print(Metrics().render())"


def child_env(shared: Path) -> dict[str, str]:
    env = {**os.environ, MULTIPROC_ENV: str(shared)}
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(code: str, shared: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=child_env(shared),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def staying(shared: Path, *args: str) -> subprocess.Popen[str]:
    """A worker that stays alive (until its stdin closes) once it has set its values."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, *args, "stay"],
        env=child_env(shared),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "set\n"
    return proc


def line(text: str, name: str) -> str:
    return next(row for row in text.splitlines() if row.startswith(name + " "))


def test_workers_counts_add_up_and_gauges_show_the_latest_live_reading(tmp_path: Path) -> None:
    """Counters and histograms sum over every process of the run, exited ones included;
    a gauge read from a shared table shows the most recent reading of a live process:
    not the sum, not one series per process, and not the reading of one that exited."""
    first = staying(tmp_path, "1", "30")
    second = None
    try:
        run(WORKER, tmp_path, "2", "40", "close")  # exited cleanly, after the first's reading
        run(WORKER, tmp_path, "3", "25", "crash")  # exited without a word
        text = run(SCRAPE, tmp_path)
        assert 'gateway_webhooks_total{outcome="accepted",provider="stripe"} 6.0' in text
        assert line(text, "gateway_request_seconds_count") == "gateway_request_seconds_count 3.0"
        assert [r for r in text.splitlines() if r.startswith("gateway_outbox_pending")] == [
            "gateway_outbox_pending 30.0"
        ]
        second = staying(tmp_path, "4", "12")  # a later reading, the backlog shrank
        assert (
            line(run(SCRAPE, tmp_path), "gateway_outbox_pending") == "gateway_outbox_pending 12.0"
        )
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.communicate("")


def test_forget_dead_processes_keeps_the_living(tmp_path: Path) -> None:
    mine = tmp_path / f"gauge_livemostrecent_{os.getpid()}.db"
    dead = tmp_path / "gauge_livemostrecent_999999999.db"
    counts = tmp_path / "counter_999999999.db"
    for path in (mine, dead, counts):
        path.write_bytes(b"")
    forget_dead_processes(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, counts.name])


@pytest.mark.parametrize("label_names", [(), ("stage",)])
def test_observe_exposes_what_the_librarys_own_observe_does(label_names: tuple[str, ...]) -> None:
    """The histogram's bisecting `observe` against prometheus_client's, on bucket bounds,
    between them, beyond the last, below zero, infinite and NaN."""
    from gateway.metrics import Histogram

    values = [*REQUEST_BUCKETS_S, 0.0, -1.0, 0.0011, 7.5, 11.0, float("inf"), float("nan")]
    values += [bound * 0.999 for bound in REQUEST_BUCKETS_S]
    ours = Histogram("gateway_x_seconds", "x", label_names)
    library = Histogram("gateway_x_seconds", "x", label_names)
    labels = {name: "v" for name in label_names}
    for value in values:
        ours.observe(value, **labels)
        library._child(labels).observe(value)
    samples = [
        {(s.name, tuple(sorted(s.labels.items()))): repr(s.value)
         for family in h._metric.collect() for s in family.samples}
        for h in (ours, library)
    ]  # fmt: skip
    assert samples[0] == samples[1]
    assert ours.get(**labels) == len(values) - 1  # NaN falls in no bucket, so in no count
