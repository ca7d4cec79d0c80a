"""`[database] require_synchronous_standby`: a boolean beside the database's url, off by
default; any other value, or an unknown key in `[database]`, stops start-up naming it."""

from __future__ import annotations

import pytest

from gateway import settings
from gateway.errors import ConfigError

NATS = {"nats": {"url": "nats://nats.internal:4222"}}
URL = "postgresql://db.internal/gw"


def parse(database: dict[str, object], env: dict[str, str] | None = None) -> settings.Settings:
    return settings.parse({"database": database, **NATS}, env or {})


def test_off_by_default() -> None:
    assert parse({"url": URL}).database.require_synchronous_standby is False


@pytest.mark.parametrize("value", [True, False])
def test_set_beside_the_url(value: bool) -> None:
    """The url stays where every caller reads it (`database_url`)."""
    got = parse({"url": URL, "require_synchronous_standby": value})
    assert got.database.require_synchronous_standby is value
    assert got.database_url == URL


def test_the_environment_url_leaves_the_section_read() -> None:
    got = parse({"require_synchronous_standby": True}, {"GATEWAY_DATABASE_URL": URL})
    assert (got.database_url, got.database.require_synchronous_standby) == (URL, True)


@pytest.mark.parametrize(
    ("value", "shown"), [("true", "'true'"), (1, "1"), (0, "0"), (["yes"], "['yes']")]
)
def test_a_value_that_is_not_a_boolean_names_the_key(value: object, shown: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse({"url": URL, "require_synchronous_standby": value})
    assert refused.value.key == "database.require_synchronous_standby"
    assert str(refused.value) == (
        f"config error: database.require_synchronous_standby: must be bool, got {shown}"
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "require_sync_standby",
            "unknown setting; did you mean database.require_synchronous_standby?",
        ),
        ("pool_size", "unknown setting"),
    ],
)
def test_an_unknown_key_is_refused_with_a_suggestion(key: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse({"url": URL, key: True})
    assert str(refused.value) == f"config error: database.{key}: {message}"
