"""No silent defaults: the database and NATS URLs come from the file or the environment,
Redis is optional, and an error shows where a server is without its credentials."""

from __future__ import annotations

import pytest

from gateway import settings
from gateway.errors import ConfigError
from gateway.settings.values import url_hosts

DATABASE = {"database": {"url": "postgresql://db.internal/gw"}}
NATS = {"nats": {"url": "nats://nats.internal:4222"}}


@pytest.mark.parametrize(
    ("doc", "env", "key", "variable"),
    [
        ({}, {}, "database.url", "GATEWAY_DATABASE_URL"),
        (NATS, {}, "database.url", "GATEWAY_DATABASE_URL"),
        (DATABASE, {}, "nats.url", "GATEWAY_NATS_URL"),
        ({"database": {"url": ""}, **NATS}, {}, "database.url", "GATEWAY_DATABASE_URL"),
        ({**DATABASE, "nats": {"stream": "W"}}, {}, "nats.url", "GATEWAY_NATS_URL"),
        ({}, {"GATEWAY_NATS_URL": "nats://n:4222"}, "database.url", "GATEWAY_DATABASE_URL"),
    ],
)
def test_a_missing_url_names_the_key_and_the_variable(
    doc: dict[str, dict[str, str]], env: dict[str, str], key: str, variable: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        settings.parse(doc, env)
    assert refused.value.key == key
    section = key.partition(".")[0]
    assert str(refused.value) == (
        f"config error: {key}: not set: give url under [{section}] in the config file, or "
        f"{variable} in the environment"
    )


def test_either_place_is_enough() -> None:
    from_file = settings.parse({**DATABASE, **NATS}, {})
    env = {"GATEWAY_DATABASE_URL": "postgresql://e/gw", "GATEWAY_NATS_URL": "nats://e:4222"}
    from_env = settings.parse({}, env)
    assert (from_file.database_url, from_file.nats.url) == (
        "postgresql://db.internal/gw",
        "nats://nats.internal:4222",
    )
    assert (from_env.database_url, from_env.nats.url) == ("postgresql://e/gw", "nats://e:4222")


def test_redis_is_optional_and_has_no_default() -> None:
    """Only the rate cache uses it: unset means no cache, not 127.0.0.1:6379."""
    assert settings.parse({**DATABASE, **NATS}, {}).redis_url == ""
    redis = {"redis": {"url": "redis://cache:6379/1"}}
    assert settings.parse({**DATABASE, **NATS, **redis}, {}).redis_url == "redis://cache:6379/1"
    with pytest.raises(ConfigError, match=r"redis\.url: must be a redis/rediss/unix:// URL"):
        settings.parse({**DATABASE, **NATS, "redis": {"url": "cache:6379"}}, {})


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://gw:s3cret@db.internal:6543/gw?sslmode=require", "db.internal:6543"),
        ("postgresql://127.0.0.1/test", "127.0.0.1:5432"),
        ("postgresql://u:p@a:1,b/db", "a:1, b:5432"),
        ("postgresql:///gw?host=/run/postgresql", "/run/postgresql"),
        ("postgresql:///gw", "the default host"),
        ("postgresql://[::1]/x", "[::1]:5432"),
        # A password with an unescaped / or @ is not mistaken for the host.
        ("postgresql://u:pa/ss@h/db", "h:5432"),
        ("postgresql://u:p@ss@h:7/db", "h:7"),
        ("nats://token@n1:4222,nats://n2", "n1:4222, n2:5432"),
    ],
)
def test_url_hosts_shows_where_without_credentials(url: str, shown: str) -> None:
    assert url_hosts(url, 5432) == shown
