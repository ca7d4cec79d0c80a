"""`[ordering] gap_timeout_s` outlasts every settlement retry schedule: a later event
is never parked because its key's earlier event is only retrying."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway import settings
from gateway.core.failures.retry import CONSUMER_DEFAULT, RetryPolicy
from gateway.errors import ConfigError
from tests.unit.settings.test_settings import ENV, GOOD


def doc_with(**sections: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    for name, values in sections.items():
        doc[name] = {**doc.get(name, {}), **values}
    return doc


def test_the_defaults_hold_the_rule() -> None:
    parsed = settings.parse(GOOD, ENV)
    assert parsed.ordering.gap_timeout_s > CONSUMER_DEFAULT.longest_s


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"ordering": {"gap_timeout_s": 60.0}}, "settlement.retry_delays_s"),
        ({"ordering": {"gap_timeout_s": 250.0}, "ledger": {"retry_delays_s": [100.0, 120.0]}},
         "ledger.retry_delays_s"),
        ({"ordering": {"gap_timeout_s": 250.0}, "currency": {"retry_delays_s": [250.0]}},
         "currency.retry_delays_s"),
    ],
)  # fmt: skip
def test_a_gap_shorter_than_a_retry_schedule_stops_start_up(
    sections: dict[str, dict[str, Any]], named: str
) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        settings.parse(doc_with(**sections), ENV)
    assert caught.value.key == "ordering.gap_timeout_s"


def test_without_ordering_the_gap_is_not_used() -> None:
    doc = doc_with(ordering={"enabled": False, "gap_timeout_s": 1.0})
    assert settings.parse(doc, ENV).ordering.gap_timeout_s == 1.0


def test_a_schedule_with_no_delay_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        settings.parse(doc_with(currency={"retry_delays_s": []}), ENV)
    assert caught.value.key == "currency.retry_delays_s"


def test_the_longest_wait_counts_every_delay_at_its_most_jittered() -> None:
    assert RetryPolicy((10.0, 20.0), jitter_max=0.2).longest_s == pytest.approx(36.0)
