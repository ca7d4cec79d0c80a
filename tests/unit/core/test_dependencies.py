"""Which dependency an error class blames, when an observation is worth writing, and the
overview's list of dependencies (issue 42 #12)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.core.console.outages import dependency_briefs
from gateway.core.health.alerting import AlertSettings, Observation, Rule, readings
from gateway.core.health.dependencies import Dependency, Health, Seen, blamed, worth_writing

T = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("error_class", "dependency"),
    [
        ("RATE_UNAVAILABLE", Dependency.CURRENCY_SERVICE),
        ("RATE_STALE", Dependency.CURRENCY_SERVICE),
        ("RATE_SERVICE_UNAVAILABLE", Dependency.CURRENCY_SERVICE),
        ("LEDGER_UNAVAILABLE", Dependency.LEDGER),
        ("BROKER_UNAVAILABLE", Dependency.NATS),
        ("DATABASE_UNAVAILABLE", Dependency.DATABASE),
        ("PAYMENT_NOT_SETTLED", None),  # waits on another event, not on a dependency
        ("UNKNOWN_MERCHANT", None),
    ],
)
def test_each_class_blames_its_dependency(error_class: str, dependency: Dependency | None) -> None:
    assert blamed(error_class) is dependency


@pytest.mark.parametrize(
    ("last", "health", "now_s", "expected"),
    [
        (None, Health.DOWN, 0.0, True),  # a process's first observation
        (Seen(Health.UP, 0.0), Health.DOWN, 1.0, True),  # a change, at once
        (Seen(Health.DOWN, 0.0), Health.UP, 1.0, True),
        (Seen(Health.UP, 0.0), Health.UP, 29.9, False),  # the same state: nothing per event
        (Seen(Health.UP, 0.0), Health.UP, 30.0, True),  # re-asserted after REASSERT_S
    ],
)
def test_only_changes_and_reassertions_are_written(
    last: Seen | None, health: Health, now_s: float, expected: bool
) -> None:
    assert worth_writing(last, health, now_s) is expected


def test_every_dependency_is_listed_reported_or_not() -> None:
    rows = [("currency-service", "down", T, T, "settle@h:1", "RATE_UNAVAILABLE"),
            ("from-a-newer-gateway", "up", T, T, "x", None)]  # fmt: skip
    briefs = dependency_briefs(rows)
    assert [b.dependency for b in briefs] == list(Dependency)
    assert briefs[0].down and briefs[0].since == T and briefs[0].error_class == "RATE_UNAVAILABLE"
    assert all(b.state is None for b in briefs[1:])


@pytest.mark.parametrize(
    ("down_s", "active"),
    [(0.0, False), (120.0, False), (120.1, True)],  # as GatewayDependencyDown's `for: 2m`
)
def test_a_dependency_down_past_two_minutes_is_an_active_reading(
    down_s: float, active: bool
) -> None:
    obs = Observation(0, None, {}, {}, {"currency-service": down_s})
    found = [r for r in readings(obs, AlertSettings()) if r.rule is Rule.DEPENDENCY_DOWN]
    assert [(r.key, r.active) for r in found] == [("currency-service", active)]
