"""`[confirm]`: the confirm stage's pace and retry schedule have working defaults, and a
value out of its bounds stops start-up with one error naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings
from gateway.core.confirm.decisions import ConfirmPolicy
from gateway.errors import ConfigError
from gateway.settings.confirm import BOUNDS, ConfirmSettings
from tests.support.config_file import with_urls


def parse(confirm: dict[str, Any]) -> ConfirmSettings:
    return settings.parse(with_urls({"confirm": confirm}), env={}).confirm


def test_defaults() -> None:
    """Without a `[confirm]` table: 20 requests a second, 8 at once, 40 tries from 1 s
    doubling to 300 s, and no /metrics listener."""
    read = settings.parse(with_urls({}), env={}).confirm
    assert read == ConfirmSettings(
        rate_per_s=20.0,
        concurrency=8,
        batch=100,
        lease_s=300.0,
        poll_s=0.5,
        max_attempts=40,
        first_delay_s=1.0,
        max_delay_s=300.0,
        metrics_host="127.0.0.1",
        metrics_port=9105,
    )
    assert read.policy == ConfirmPolicy(max_attempts=40, first_delay_s=1.0, max_delay_s=300.0)


def test_configured_values_are_read() -> None:
    """Every key is read, and the policy is made of the three retry keys."""
    read = parse(
        {
            "rate_per_s": 2.5,
            "concurrency": 3,
            "batch": 10,
            "lease_s": 30,
            "poll_s": 1,
            "max_attempts": 7,
            "first_delay_s": 5,
            "max_delay_s": 5,  # equal to first_delay_s: a flat schedule
            "metrics_host": "0.0.0.0",
            "metrics_port": 9115,
        }
    )
    assert (read.rate_per_s, read.concurrency, read.batch, read.lease_s, read.poll_s) == (
        2.5,
        3,
        10,
        30,
        1,
    )
    assert read.policy == ConfirmPolicy(max_attempts=7, first_delay_s=5, max_delay_s=5)
    assert (read.metrics_host, read.metrics_port) == ("0.0.0.0", 9115)


LIMITS = {key: (low, high) for key, low, high in BOUNDS}


def beside(key: str, value: float) -> dict[str, Any]:
    """`key` at `value`, with the delay it is compared with moved out of its way (to
    the end of its own range that cannot conflict)."""
    if key == "max_delay_s":
        return {key: value, "first_delay_s": LIMITS["first_delay_s"][0]}
    if key == "first_delay_s":
        return {key: value, "max_delay_s": LIMITS["max_delay_s"][1]}
    return {key: value}


@pytest.mark.parametrize(("key", "low", "high"), BOUNDS)
def test_each_bound_is_allowed(key: str, low: float, high: float) -> None:
    """The bounds themselves are read as given."""
    kind = type(getattr(ConfirmSettings(), key))
    assert getattr(parse(beside(key, kind(low))), key) == low
    assert getattr(parse(beside(key, kind(high))), key) == high


@pytest.mark.parametrize(("key", "low", "high"), BOUNDS)
def test_each_bound_is_refused_past_it_naming_its_key(key: str, low: float, high: float) -> None:
    """Just below the low bound and just above the high one, start-up stops on the key.
    (An integer whose low bound is 1 meets the rule that numbers are positive first.)"""
    integer = type(getattr(ConfirmSettings(), key)) is int
    below, above = (int(low) - 1, int(high) + 1) if integer else (low / 2, high * 2)
    for value in (below, above):
        with pytest.raises(ConfigError) as caught:
            parse(beside(key, value))
        assert caught.value.key == f"confirm.{key}"
        says = "positive" if value <= 0 else f"must be {low:g} to {high:g}"
        assert says in str(caught.value)


def test_the_bounds_cover_every_number_but_the_port() -> None:
    """No number of `[confirm]` is left unbounded (the port has its own rule)."""
    numbers = {
        name
        for name, value in vars(ConfirmSettings()).items()
        if type(value) in (int, float) and name != "metrics_port"
    }
    assert {key for key, _, _ in BOUNDS} == numbers


@pytest.mark.parametrize(
    ("confirm", "key", "says"),
    [
        # Values far outside, as a typo makes them.
        ({"rate_per_s": 1e6}, "confirm.rate_per_s", "0.1 to 10000"),
        ({"concurrency": 10_000}, "confirm.concurrency", "1 to 256"),
        ({"lease_s": 1}, "confirm.lease_s", "5 to 3600"),
        ({"max_attempts": 1_000_000}, "confirm.max_attempts", "1 to 1000"),
        ({"metrics_port": 65_536}, "confirm.metrics_port", "0 to 65535"),
        # Zero is no rate, no slot and no try: refused before the bounds.
        ({"rate_per_s": 0}, "confirm.rate_per_s", "positive"),
        ({"concurrency": 0}, "confirm.concurrency", "positive"),
        ({"max_attempts": 0}, "confirm.max_attempts", "positive"),
        ({"lease_s": -60}, "confirm.lease_s", "positive"),
        ({"metrics_port": -1}, "confirm.metrics_port", "positive"),
        ({"rate_per_s": float("nan")}, "confirm.rate_per_s", "positive"),
        ({"max_delay_s": float("inf")}, "confirm.max_delay_s", "positive"),
        # The wrong type is refused, whatever its value.
        ({"concurrency": 2.5}, "confirm.concurrency", "must be int"),
        ({"max_attempts": True}, "confirm.max_attempts", "must be int"),
        ({"rate_per_s": "20"}, "confirm.rate_per_s", "must be float"),
    ],
)
def test_a_bad_value_names_its_key(confirm: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(confirm)
    assert caught.value.key == key
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("first_delay_s", "max_delay_s"),
    [(10, 5), (3_600, 1_000), (2, 1.5)],
)
def test_a_cap_below_the_first_delay_is_refused(first_delay_s: float, max_delay_s: float) -> None:
    """The delays only grow up to max_delay_s: a cap below the first delay is a typo."""
    with pytest.raises(ConfigError) as caught:
        parse({"first_delay_s": first_delay_s, "max_delay_s": max_delay_s})
    assert caught.value.key == "confirm.max_delay_s"
    assert "first_delay_s" in str(caught.value)


@pytest.mark.parametrize(
    ("confirm", "key", "says"),
    [
        ({"rate": 5}, "confirm.rate", "unknown"),
        ({"max_attempt": 5}, "confirm.max_attempt", "did you mean"),
        ({"api_key_env": "MOLLIE_KEY"}, "confirm.api_key_env", "unknown"),  # a provider's key
    ],
)
def test_an_unknown_key_is_refused(confirm: dict[str, Any], key: str, says: str) -> None:
    """A key `[confirm]` does not have stops start-up, naming it."""
    with pytest.raises(ConfigError) as caught:
        parse(confirm)
    assert caught.value.key == key
    assert says in str(caught.value)
