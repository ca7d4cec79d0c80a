"""`/readyz`'s answer from each probed dependency (`core.health.readiness`): 200 only when
every one answered, else 503 with one code per dependency that did not, in order, and
nothing but the codes and booleans."""

from __future__ import annotations

import pytest

from gateway.core.health.readiness import UNREACHABLE, Dependency, NotReady, liveness, readiness

D = Dependency


@pytest.mark.parametrize(
    ("answered", "status", "body"),
    [
        # Not yet opened: the listener is bound before the dependencies.
        (None, 503, {"status": "not_ready", "reasons": ["starting"]}),
        # Everything answers.
        (
            {D.DATABASE: True, D.NATS: True},
            200,
            {"status": "ready", "database": True, "nats": True},
        ),
        # One down: its code alone.
        (
            {D.DATABASE: False, D.NATS: True},
            503,
            {
                "status": "not_ready",
                "database": False,
                "nats": True,
                "reasons": ["database_unreachable"],
            },
        ),
        # Several down: each code, in the order the dependencies were given.
        (
            {D.DATABASE: True, D.NATS: False, D.LEDGER: False, D.CURRENCY_SERVICE: False},
            503,
            {
                "status": "not_ready",
                "database": True,
                "nats": False,
                "ledger": False,
                "currency-service": False,
                "reasons": [
                    "nats_unreachable",
                    "ledger_unreachable",
                    "currency_service_unreachable",
                ],
            },
        ),
        # A process that probes nothing it cannot do without is ready.
        ({}, 200, {"status": "ready"}),
    ],
)
def test_readiness(
    answered: dict[Dependency, bool] | None, status: int, body: dict[str, object]
) -> None:
    assert readiness(answered) == (status, body)


def test_every_dependency_has_its_own_code() -> None:
    """A code per dependency, none shared (an alert rule tells them apart), and
    `starting` for none of them."""
    assert set(UNREACHABLE) == set(Dependency)
    assert len(set(UNREACHABLE.values())) == len(Dependency)
    assert NotReady.STARTING not in UNREACHABLE.values()


def test_liveness_is_answered_by_being_asked() -> None:
    assert liveness() == (200, {"status": "alive"})
