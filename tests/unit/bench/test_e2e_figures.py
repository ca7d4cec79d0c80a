"""The end-to-end pass's figures and checks, from stored timestamps and counts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench.e2e_figures import (
    BurstTimes,
    LedgerFacts,
    burst_figures,
    cpu_per_event_us,
    end_to_end_checks,
    latency_figures,
    paced_rate,
    percentile,
)

T0 = 1_000_000.0


def times(**changes: float | int | None) -> BurstTimes:
    base = BurstTimes(
        first_request_s=T0,
        last_accepted_s=T0 + 10,
        last_on_stream_s=T0 + 20,
        last_settled_s=T0 + 25,
        accepted=50_000,
        on_stream=50_000,
        settled=50_000,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("burst", "key", "expected"),
    [
        # Rates run from the first request to the last of each stage.
        (times(), "on_stream_per_s", 2_500.0),
        (times(), "settled_per_s", 2_000.0),
        # The lag counts from the last accepted request, not from the first.
        (times(), "ledger_lag_after_load_s", 15.0),
        (times(), "stream_lag_after_load_s", 10.0),
        # settled/accepted compares the two rates: 2,000 / 5,000.
        (times(), "settled_over_accepted", 0.4),
        # A chain that keeps up settles as fast as it accepts.
        (times(last_on_stream_s=T0 + 10, last_settled_s=T0 + 10), "settled_over_accepted", 1.0),
        # Nothing settled: no rate, no lag, no ratio (rather than a division by zero).
        (times(last_settled_s=None, settled=0), "settled_per_s", None),
        (times(last_settled_s=None, settled=0), "ledger_lag_after_load_s", None),
        (times(last_settled_s=None, settled=0), "settled_over_accepted", None),
    ],
)
def test_burst_figures(burst: BurstTimes, key: str, expected: float | None) -> None:
    assert burst_figures(burst, accepted_per_s=5_000.0, bare_rps=20_000.0)[key] == expected


@pytest.mark.parametrize(
    ("bare", "expected"),
    [(20_000.0, 0.25), (None, None)],  # without (a) in the run, no ratio against it
)
def test_accepted_over_bare(bare: float | None, expected: float | None) -> None:
    assert burst_figures(times(), 5_000.0, bare)["accepted_over_bare"] == expected


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        # Half of the slowest stage: settlement here.
        ({"accepted_per_s": 5_000.0, "on_stream_per_s": 2_500.0, "settled_per_s": 2_000.0}, 1000),
        # A stage not measured does not count as the slowest.
        ({"accepted_per_s": 5_000.0, "on_stream_per_s": None, "settled_per_s": None}, 2500),
        # Never below one event a second.
        ({"accepted_per_s": 1.0, "on_stream_per_s": 1.0, "settled_per_s": 0.5}, 1.0),
    ],
)
def test_paced_rate(figures: dict[str, float | None], expected: float) -> None:
    assert paced_rate(figures) == expected


def test_paced_rate_needs_a_rate() -> None:
    with pytest.raises(ValueError, match="no rate"):
        paced_rate({"accepted_per_s": None})


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([3.0], 99, 3.0),
        ([4.0, 1.0, 3.0, 2.0], 50, 2.0),  # nearest rank: the 2nd of 4
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([float(i) for i in range(1, 101)], 100, 100.0),
    ],
)
def test_percentile(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def test_latency_counts_from_the_due_time_and_leaves_out_failures() -> None:
    # Three requests due at 0, 1, 2 s: the second was sent 0.5 s late (its wait counts),
    # the third failed (not answered) and is left out; the first settled 0.1 s after due.
    found = latency_figures(
        due_s=[0.0, 1.0, 2.0],
        sent_s=[0.0, 1.5, 2.0],
        answered_s=[0.01, 1.52, 0.0],
        settled_s=[0.1, 1.7, None],
    )
    assert found["answered"] == 2
    assert found["settled"] == 2
    assert found["webhook_to_settled_ms"] == {"p50": 100.0, "p99": 700.0, "max": 700.0}
    assert found["send_delay_ms"]["max"] == 500.0


def test_an_unsettled_event_is_counted_as_missing() -> None:
    found = latency_figures([0.0, 1.0], [0.0, 1.0], [0.01, 1.01], [0.2, None])
    assert (found["answered"], found["settled"]) == (2, 1)


def test_cpu_per_event() -> None:
    # 50 % of a core for 10 s is 5 s of CPU: 500 µs for each of 10,000 events.
    cpu: dict[str, Any] = {
        "server_pct": 50.0,
        "postgres_db_pct": None,
        "elapsed_s": 10.0,
        "others": [],
    }
    assert cpu_per_event_us(cpu, 10_000) == {"server": 500.0, "postgres_db": None}
    assert cpu_per_event_us(cpu, 0) == {"server": None, "postgres_db": None}


GOOD = LedgerFacts(
    rows=1_000,
    accepted_answers=1_000,
    wrk_accepted=990,
    unanswered=10,
    stream_messages=1_000,
    settlements=1_000,
    settled=1_000,
    settlement_rows_matched=1_000,
    transfers=1_000,
    dlq_rows=0,
    accepted_amount_minor=1_000_000,
    merchant_credits_minor=1_000_000,
    merchant_debits_minor=0,
    ledger_debits=1_000_000,
    ledger_credits=1_000_000,
)


def failed(facts: LedgerFacts) -> list[str]:
    return [c["check"] for c in end_to_end_checks(facts) if not c["ok"]]


def test_checks_hold_for_a_ledger_that_holds_exactly_the_accepted_payments() -> None:
    assert failed(GOOD) == []


@pytest.mark.parametrize(
    ("change", "failing"),
    [
        ({"wrk_accepted": 1_001}, "rows within"),  # more answers read than rows
        ({"unanswered": 9}, "rows within"),  # a row nobody sent
        ({"accepted_answers": 999}, "one row per accepted event"),
        ({"stream_messages": 1_001}, "one stream message per row"),
        ({"settled": 999}, "one settled settlement per row"),
        ({"settlement_rows_matched": 999}, "one settled settlement per row"),
        ({"transfers": 1_001}, "one transfer per accepted payment"),
        ({"dlq_rows": 1}, "no dead letters"),
        ({"ledger_debits": 999_000}, "ledger balanced"),
        # A payment settled twice shows as more money than was accepted.
        ({"merchant_credits_minor": 1_001_000}, "the merchant holds"),
        ({"merchant_debits_minor": 1_000}, "the merchant holds"),
    ],
)
def test_each_check_catches_its_fault(change: dict[str, int], failing: str) -> None:
    names = failed(dataclasses.replace(GOOD, **change))
    assert len(names) == 1 and names[0].startswith(failing), names


def test_without_a_transfer_count_settled_settlements_stand_in() -> None:
    facts = dataclasses.replace(GOOD, transfers=None)
    assert failed(facts) == []
    assert failed(dataclasses.replace(facts, settled=999)) == [
        "one settled settlement per row",
        "one transfer per accepted payment",
    ]
