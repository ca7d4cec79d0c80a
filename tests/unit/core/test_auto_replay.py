"""Which dead letters the automatic re-drive takes in a round, as tables: class, cap,
dependency answering, backoff doubling, the round's cap and order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.dlq.auto_replay import (
    DEFAULT_CLASSES,
    WAITS_ON,
    AutoReplayPolicy,
    Candidate,
    down_again,
    due,
    is_due,
    unknown_classes,
)
from gateway.core.health.dependencies import Dependency
from gateway.errors import ErrorClass, Family

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POLICY = AutoReplayPolicy(
    classes=frozenset(DEFAULT_CLASSES), max_per_row=3, per_round=100, backoff_s=60.0
)
EVERY = frozenset(Dependency)


def row(
    error_class: str = "RATE_UNAVAILABLE", n: int = 0, ago_s: float | None = None, id_: int = 1
) -> Candidate:
    last = None if ago_s is None else NOW - timedelta(seconds=ago_s)
    return Candidate(id_, error_class, n, last)


# (row, dependencies answering, due?, why)
CASES = [
    (row(), EVERY, True, "never re-driven, its dependency answers: due"),
    (row(), frozenset({Dependency.LEDGER}), False, "the currency-service does not answer"),
    (row("LEDGER_UNAVAILABLE"), frozenset({Dependency.LEDGER}), True, "ledger back"),
    (row("PUBLISH_ATTEMPTS_EXHAUSTED"), frozenset({Dependency.NATS}), True, "NATS back"),
    (row("BROKER_UNAVAILABLE"), frozenset({Dependency.LEDGER}), False, "NATS still away"),
    (row("UNKNOWN_MERCHANT"), EVERY, False, "a permanent class is never re-driven"),
    (row("PAYMENT_NOT_SETTLED"), EVERY, False, "transient, but no dependency cures it"),
    (row("BLOCKED_BY_PREDECESSOR"), EVERY, False, "held behind its key: a person's call"),
    (row(n=3, ago_s=10_000), EVERY, False, "at auto_replay_max: never again"),
    (row(n=2, ago_s=10_000), EVERY, True, "below the cap, backoff long past"),
    (row(n=1, ago_s=59), EVERY, False, "first backoff (60 s) not yet over"),
    (row(n=1, ago_s=60), EVERY, True, "first backoff over"),
    (row(n=2, ago_s=119), EVERY, False, "the backoff doubles: 120 s after the second"),
    (row(n=2, ago_s=120), EVERY, True, "second backoff over"),
]


@pytest.mark.parametrize(("candidate", "answering", "expected", "why"), CASES)
def test_one_row(
    candidate: Candidate, answering: frozenset[Dependency], expected: bool, why: str
) -> None:
    assert bool(due([candidate], answering, POLICY, NOW)) is expected, why


def test_a_class_left_out_of_the_settings_is_not_re_driven() -> None:
    """`auto_replay_classes` without RATE_STALE: its rows wait for a person."""
    policy = AutoReplayPolicy(frozenset({"RATE_UNAVAILABLE"}), 3, 100, 60.0)
    assert not is_due(row("RATE_STALE"), policy, NOW)
    assert is_due(row("RATE_UNAVAILABLE"), policy, NOW)


def test_the_round_cap_takes_the_first_due_rows_in_the_order_given() -> None:
    """At most per_round rows, in the replay order the query gave, passing over rows that
    are not due rather than stopping at them."""
    rows = [
        row(id_=1),
        row(id_=2, n=1, ago_s=1),  # in its backoff
        row("UNKNOWN_ACCOUNT", id_=3),
        row(id_=4),
        row(id_=5),
    ]
    policy = AutoReplayPolicy(frozenset(DEFAULT_CLASSES), 3, 2, 60.0)
    assert [r.id for r in due(rows, EVERY, policy, NOW)] == [1, 4]


def test_every_class_re_driven_is_transient_or_the_outboxs_given_up() -> None:
    """Only classes a dependency's return cures: none the worker parks at once for the
    event's own sake (PUBLISH_ATTEMPTS_EXHAUSTED is the broker not confirming)."""
    for name in WAITS_ON:
        family = ErrorClass(name).family
        assert family is Family.TRANSIENT or name == "PUBLISH_ATTEMPTS_EXHAUSTED", name


def test_a_failure_blaming_a_dependency_says_it_is_away_again() -> None:
    assert down_again("RATE_UNAVAILABLE") is Dependency.CURRENCY_SERVICE
    assert down_again("LEDGER_UNAVAILABLE") is Dependency.LEDGER
    assert down_again("UNKNOWN_MERCHANT") is None  # the row's own fault, not the dependency's
    assert down_again(None) is None


def test_unknown_classes_names_those_that_cannot_be_re_driven() -> None:
    assert unknown_classes(["RATE_STALE", "UNKNOWN_MERCHANT", "rate_stale"]) == [
        "UNKNOWN_MERCHANT",
        "rate_stale",
    ]


def test_a_row_at_the_highest_cap_waits_without_overflowing() -> None:
    """`auto_replay_max` allows 100 replays: the 99th's doubled backoff (60 s * 2**98)
    is past what a `timedelta` holds, and must read as "not yet", not stop the round."""
    policy = AutoReplayPolicy(
        classes=frozenset(DEFAULT_CLASSES), max_per_row=100, per_round=100, backoff_s=60.0
    )
    far_along = row(n=99, ago_s=86_400.0 * 365)
    assert is_due(far_along, policy, NOW) is False
    assert due([far_along, row(id_=2)], EVERY, policy, NOW) == [row(id_=2)]
