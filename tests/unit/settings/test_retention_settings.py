"""`[retention]`: defaults, zero meaning "for ever", and the keys' horizon."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings
from gateway.errors import ConfigError
from gateway.settings import RetentionSettings
from tests.support.config_file import with_urls


def parse(retention: dict[str, Any]) -> RetentionSettings:
    return settings.parse(with_urls({"retention": retention}), env={}).retention


def test_defaults_keep_payloads_30_days_and_keys_for_ever() -> None:
    assert settings.parse(with_urls({}), env={}).retention == RetentionSettings(
        payload_max_age_s=30 * 86_400.0, key_max_age_s=0.0
    )


@pytest.mark.parametrize(
    ("retention", "expected"),
    [
        # Seconds, so a test can use one or two.
        ({"payload_max_age_s": 1, "key_max_age_s": 2}, (1.0, 2.0)),
        # 0 = for ever, for either.
        ({"payload_max_age_s": 0, "key_max_age_s": 86_400}, (0.0, 86_400.0)),
        ({"payload_max_age_s": 0, "key_max_age_s": 0}, (0.0, 0.0)),
        # Keys may outlive payloads by any margin, or equal them.
        ({"payload_max_age_s": 60, "key_max_age_s": 60}, (60.0, 60.0)),
    ],
)
def test_ages_are_read_in_seconds(retention: dict[str, Any], expected: tuple[float, float]) -> None:
    read = parse(retention)
    assert (read.payload_max_age_s, read.key_max_age_s) == expected


@pytest.mark.parametrize(
    ("retention", "key", "says"),
    [
        # Deleting the row deletes the payload too: keys cannot go before payloads.
        ({"payload_max_age_s": 10, "key_max_age_s": 5}, "retention.key_max_age_s", "at least"),
        ({"batch_size": 0}, "retention.batch_size", "must be positive"),
        ({"interval_s": -1}, "retention.interval_s", "must be positive"),
        ({"payload_max_age_s": -1}, "retention.payload_max_age_s", "must be positive"),
        ({"background": "yes"}, "retention.background", "must be bool"),
        ({"payload_max_age": 10}, "retention.payload_max_age", "did you mean"),
    ],
)
def test_bad_values_name_their_key(retention: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(retention)
    assert caught.value.key == key
    assert says in str(caught.value)


def test_retention_is_a_known_section() -> None:
    with pytest.raises(ConfigError, match="did you mean retention"):
        settings.parse(with_urls({"retension": {}}), env={})
