"""`database.url` may list several hosts; a list that cannot be read, or a session
attribute that would settle on a read-only server, stops start-up naming the key."""

from __future__ import annotations

import pytest

from gateway import settings
from gateway.errors import ConfigError

NATS = {"nats": {"url": "nats://nats.internal:4222"}}


def parse_url(url: str, env: dict[str, str] | None = None) -> settings.Settings:
    return settings.parse({"database": {"url": url}, **NATS}, env or {})


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://gw:pw@db1:5432,db2:5432/gw",
        "postgresql://gw@db1,db2,db3/gw?target_session_attrs=read-write",
        "postgres://[2001:db8::1]:5432,[2001:db8::2]:5432/gw?target_session_attrs=primary",
        "postgresql:///gw?host=db1,db2&port=5432,6432",
        "postgresql://db1,db2/gw?target_session_attrs=any&sslmode=require",
    ],
)
def test_a_multi_host_url_is_accepted_as_written(url: str) -> None:
    """The URL is kept byte for byte: the pool reads the same string."""
    assert parse_url(url).database_url == url


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://gw:pw@db1,,db2/gw", "host 2 of 3 is empty"),
        ("postgresql://gw:pw@db1:5432,db2:port/gw", "host 2 of 2: a port must be a number"),
        ("postgresql://gw:pw@db1,::1/gw", "write an IPv6 address in brackets"),
        ("postgresql://gw:pw@[::1/gw", "the URL cannot be parsed"),
        ("postgresql://gw:p@ss@db1,db2/gw", "write '@' in a password as %40"),
        ("postgresql://db1,db2/gw?target_session_attrs=sometimes", "target_session_attrs must"),
    ],
)
def test_an_unreadable_host_list_names_database_url(url: str, problem: str) -> None:
    """One line naming the key and the mistake, never the password."""
    with pytest.raises(ConfigError) as refused:
        parse_url(url)
    assert refused.value.key == "database.url"
    assert problem in refused.value.problem
    assert "pw" not in str(refused.value) and "ss@" not in str(refused.value)


def test_the_environment_variable_is_named_when_it_holds_the_url() -> None:
    env = {"GATEWAY_DATABASE_URL": "postgresql://gw:pw@db1,,db2/gw"}
    with pytest.raises(ConfigError) as refused:
        settings.parse(NATS, env)
    assert refused.value.key == "GATEWAY_DATABASE_URL"


@pytest.mark.parametrize("attrs", ["read-only", "standby", "prefer-standby"])
def test_a_session_attribute_that_cannot_write_is_refused(attrs: str) -> None:
    """Every gateway process writes: a URL aimed at standbys would fail every write."""
    with pytest.raises(ConfigError) as refused:
        parse_url(f"postgresql://db1,db2/gw?target_session_attrs={attrs}")
    assert refused.value.problem == (
        f"target_session_attrs={attrs} connects to servers that refuse writes, and every "
        "gateway process writes: use one of any, primary, read-write"
    )


def test_pgport_is_read_from_the_environment_given_to_parse() -> None:
    """PGPORT, as asyncpg reads it, must fit the list: three hosts cannot take two ports."""
    with pytest.raises(ConfigError, match="2 ports given for 3 hosts"):
        parse_url("postgresql://db1,db2,db3/gw", {"PGPORT": "5432,5433"})


def test_a_pghost_list_is_checked_as_the_urls_own() -> None:
    """`PGHOST=h1,h2` is a host list like the URL's: read at start-up, its session
    attribute defaulting to the writable server and refused when it cannot write."""
    url = "postgresql://gw@/gw"
    assert parse_url(url, {"PGHOST": "db1,db2"}).database_url == url
    with pytest.raises(ConfigError) as refused:
        parse_url(url, {"PGHOST": "db1,,db2"})
    assert (refused.value.key, refused.value.problem) == ("database.url", "host 2 of 3 is empty")
    with pytest.raises(ConfigError, match="target_session_attrs=read-only connects"):
        parse_url(f"{url}?target_session_attrs=read-only", {"PGHOST": "db1,db2"})


def test_a_service_file_naming_the_hosts_is_refused() -> None:
    """Hosts from a service file could be a list that asyncpg walks within one timeout:
    start-up says to list them in the URL, which keeps its service= for the rest."""
    with pytest.raises(ConfigError) as refused:
        parse_url("postgresql://gw:pw@/gw?service=payments")
    assert refused.value.key == "database.url"
    assert "name the hosts in the URL" in refused.value.problem
    assert "pw" not in str(refused.value)
    url = "postgresql://gw@db1,db2/gw?service=payments"
    assert parse_url(url).database_url == url


def _listed(count: int) -> str:
    return ",".join(f"db{i}.internal" for i in range(1, count + 1))


def test_seventeen_hosts_stop_start_up_naming_the_key_and_the_cap() -> None:
    """More hosts than the cap is a mistake found at start-up, not a connect that walks
    them all: one line naming the key that held the URL, and the cap."""
    with pytest.raises(ConfigError) as refused:
        parse_url(f"postgresql://gw:pw@{_listed(17)}/gw")
    assert (refused.value.key, refused.value.problem) == (
        "database.url",
        "the URL lists 17 hosts; at most 16 are allowed",
    )
    env = {"GATEWAY_DATABASE_URL": f"postgresql://gw:pw@{_listed(17)}/gw"}
    with pytest.raises(ConfigError) as refused:
        settings.parse(NATS, env)
    assert refused.value.key == "GATEWAY_DATABASE_URL"
    assert "at most 16" in refused.value.problem
    with pytest.raises(ConfigError, match="PGHOST lists 17 hosts; at most 16"):
        parse_url("postgresql://gw@/gw", {"PGHOST": _listed(17)})


def test_sixteen_hosts_are_accepted() -> None:
    url = f"postgresql://gw:pw@{_listed(16)}/gw"
    assert parse_url(url).database_url == url
