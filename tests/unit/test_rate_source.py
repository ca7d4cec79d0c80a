"""Where a settlement's rate came from, as the `currency.rate` span says it
(`Settler.rate_from`): the service, the Redis cache when the service gave none, or this
process's own memory of a rate it asked for a moment ago."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

import pytest

from gateway import settings as settings_mod
from gateway.adapters.currency import RateSource
from gateway.core.currency import Rate, RateAction, RateDecision, RateOrigin
from gateway.core.ledger.port import Ledger
from gateway.settlement.settler import Settler
from tests.support.gateway import config


class Rates:
    """A `RateSource` stand-in answering from `origins`, one per call."""

    def __init__(self, *origins: RateOrigin) -> None:
        self.origins = list(origins)
        self.calls = 0

    async def decide(self, base: str, quote: str, *, attempt: int = 1) -> RateDecision:
        self.calls += 1
        rate = Rate(base=base, quote=quote, rate=Decimal("1.1"), as_of=datetime.now(UTC))
        return RateDecision(RateAction.USE, rate=rate, origin=self.origins.pop(0))


def settler(rates: Rates) -> Settler:
    settings = settings_mod.parse(config("postgresql://db/x", "nats://127.0.0.1:4222"), env={})
    return Settler(
        settings.settlement,
        settings.providers,
        settings.services,
        cast(Any, None),
        cast(Ledger, None),
        cast(RateSource, rates),
    )


@pytest.mark.parametrize("origin", [RateOrigin.SERVICE, RateOrigin.CACHE])
async def test_the_first_look_up_says_service_or_cache(origin: RateOrigin) -> None:
    """The first look-up names the rate source's origin (cache: the fallback)."""
    assert await settler(Rates(origin)).rate_from("EUR", 1) == (Decimal("1.1"), origin.value)


async def test_a_remembered_rate_says_memory() -> None:
    """A second look-up within the memo's few seconds asks nothing and says memory."""
    rates = Rates(RateOrigin.SERVICE)
    s = settler(rates)
    await s.rate_from("EUR", 1)
    assert await s.rate_from("EUR", 1) == (Decimal("1.1"), "memory")
    assert rates.calls == 1
