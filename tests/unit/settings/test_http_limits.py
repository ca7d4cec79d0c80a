"""The `[http]` edge limits: safe defaults, and a bad value stops start-up with one line
naming its key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings
from gateway.edge import edge_options
from gateway.errors import ConfigError
from tests.unit.settings.test_settings import ENV, with_change


def test_defaults_are_finite() -> None:
    """Every limit is on by default, so an unconfigured gateway is protected."""
    http = settings.parse(with_change("http.max_body_bytes", ...), ENV).http
    assert (http.max_header_bytes, http.header_timeout_s, http.keepalive_timeout_s) == (
        32768,
        10.0,
        5.0,
    )
    # Above request_timeout_s, so the ingestion routes' own 400 comes first.
    assert http.body_timeout_s == 20.0 > http.request_timeout_s
    assert (http.max_connections, http.backlog) == (1000, 2048)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_header_bytes", 4096),  # the smallest allowed
        ("max_header_bytes", 1_048_576),  # the largest allowed
        ("header_timeout_s", 0.5),
        ("header_timeout_s", 30),  # an integer where seconds are expected is fine
        ("keepalive_timeout_s", 75.0),  # above a proxy's 60 s idle timeout
        ("body_timeout_s", 0.5),
        ("body_timeout_s", 120),
        ("max_connections", 1),
        ("backlog", 128),
    ],
)
def test_good_values_are_taken_as_written(key: str, value: Any) -> None:
    http = settings.parse(with_change(f"http.{key}", value), ENV).http
    assert getattr(http, key) == value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_header_bytes", 4095),  # too small for real deliveries behind a proxy
        ("max_header_bytes", 1_048_577),  # too large to protect anything
        ("max_header_bytes", 0),
        ("max_header_bytes", "32k"),
        ("header_timeout_s", 0),  # zero would mean no deadline: refused, not "off"
        ("header_timeout_s", -1.0),
        ("header_timeout_s", "10s"),
        ("header_timeout_s", float("nan")),  # TOML has nan and inf; a timer takes neither
        ("keepalive_timeout_s", float("inf")),
        ("request_timeout_s", float("nan")),
        ("keepalive_timeout_s", 0),
        ("body_timeout_s", 0),  # zero would mean no deadline: refused, not "off"
        ("body_timeout_s", -20.0),
        ("body_timeout_s", float("inf")),
        ("body_timeout_s", "20s"),
        ("max_connections", 0),
        ("max_connections", True),
        ("max_connections", 10.5),
        ("backlog", -5),
        ("header_timeout", 10),  # a misspelt key is refused, not ignored
    ],
)
def test_bad_values_name_their_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        settings.parse(with_change(f"http.{key}", value), ENV)
    assert info.value.key == f"http.{key}"
    assert "\n" not in str(info.value)


def test_the_limits_reach_uvicorn() -> None:
    """`edge_options` maps each setting onto the uvicorn option that enforces it."""
    doc = with_change("http.max_connections", 7)
    http = settings.parse(doc, ENV).http
    options = edge_options(http)
    assert options["limit_concurrency"] == 7
    assert options["timeout_keep_alive"] == http.keepalive_timeout_s
    assert options["backlog"] == http.backlog
    assert options["http"].keywords == {
        "max_header_bytes": http.max_header_bytes,
        "header_timeout_s": http.header_timeout_s,
        "body_timeout_s": http.body_timeout_s,
    }
