"""`[dlq]`: the automatic re-drive is on by default for the classes a dependency's return
cures, and a bad value stops start-up with one error naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings
from gateway.core.dlq.auto_replay import DEFAULT_CLASSES
from gateway.errors import ConfigError
from gateway.settings.dlq import DlqSettings
from tests.support.config_file import with_urls


def parse(dlq: dict[str, Any]) -> DlqSettings:
    return settings.parse(with_urls({"dlq": dlq}), env={}).dlq


def test_on_by_default_for_the_rate_ledger_and_publish_classes() -> None:
    read = settings.parse(with_urls({}), env={}).dlq
    assert read.auto_replay is True
    assert set(read.auto_replay_classes) == {
        "RATE_UNAVAILABLE",
        "RATE_STALE",
        "RATE_SERVICE_UNAVAILABLE",
        "LEDGER_UNAVAILABLE",
        "BROKER_UNAVAILABLE",
        "PUBLISH_ATTEMPTS_EXHAUSTED",
    }
    assert read.auto_replay_classes == DEFAULT_CLASSES
    assert read.auto_replay_max == 3


def test_configured_values_are_read() -> None:
    read = parse(
        {
            "auto_replay": False,
            "auto_replay_classes": ["RATE_UNAVAILABLE"],
            "auto_replay_max": 5,
            "auto_replay_per_round": 10,
            "auto_replay_rate_per_s": 0.5,
            "auto_replay_interval_s": 5,
        }
    )
    assert (read.auto_replay, read.auto_replay_classes, read.auto_replay_max) == (
        False,
        ("RATE_UNAVAILABLE",),
        5,
    )
    assert read.policy.per_round == 10 and read.auto_replay_rate_per_s == 0.5


@pytest.mark.parametrize(
    ("dlq", "key", "says"),
    [
        ({"auto_replay_classes": ["UNKNOWN_MERCHANT"]}, "dlq.auto_replay_classes", "allowed:"),
        ({"auto_replay_classes": ["rate_unavailable"]}, "dlq.auto_replay_classes", "cannot"),
        ({"auto_replay_classes": []}, "dlq.auto_replay_classes", "non-empty"),
        ({"auto_replay_max": 0}, "dlq.auto_replay_max", "positive"),
        ({"auto_replay_max": 101}, "dlq.auto_replay_max", "1 to 100"),
        ({"auto_replay_per_round": 20_000}, "dlq.auto_replay_per_round", "1 to 10000"),
        ({"auto_replay_rate_per_s": 0}, "dlq.auto_replay_rate_per_s", "positive"),
        ({"auto_replay_interval_s": -1}, "dlq.auto_replay_interval_s", "positive"),
        # A round holds its lock and a connection throughout: its pace and probes are bounded.
        ({"auto_replay_rate_per_s": 1e-9}, "dlq.auto_replay_rate_per_s", "0.1 to 1000"),
        ({"auto_replay_interval_s": 1e12}, "dlq.auto_replay_interval_s", "0 to 86400"),
        ({"auto_replay_backoff_s": 1e300}, "dlq.auto_replay_backoff_s", "0 to 86400"),
        ({"auto_replay_probe_timeout_s": 3600}, "dlq.auto_replay_probe_timeout_s", "0.1 to 60"),
        ({"auto_replay": "yes"}, "dlq.auto_replay", "bool"),
        ({"auto_replay_maximum": 3}, "dlq.auto_replay_maximum", "did you mean"),
    ],
)
def test_a_bad_value_names_its_key(dlq: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(dlq)
    assert caught.value.key == key
    assert says in str(caught.value)
