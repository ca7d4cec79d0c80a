"""Configuration: a bad or missing setting stops start-up with one line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway import settings
from gateway.errors import ConfigError
from gateway.settings.sections import HEADER_BUDGET_BYTES

GOOD: dict[str, Any] = {
    "database": {"url": "postgresql://127.0.0.1:5432/test"},
    "nats": {"url": "nats://127.0.0.1:4222"},
    "redis": {"url": "redis://127.0.0.1:6379/0"},
    "http": {"host": "127.0.0.1", "port": 8080, "max_body_bytes": 1040384},
    "providers": {
        "stripe": {"scheme": "stripe", "secrets": ["whsec_a", "whsec_b"], "tolerance_s": 300},
        "acme": {
            "scheme": "hmac",
            "secret_env": "ACME_SECRET",
            "header": "X-Sig",
            "event_id_from": "header:X-Id",
            "event_type_from": "json:kind",
        },
    },
    "services": {"billing": {"token_env": "BILLING_TOKEN", "subjects": ["events.billing.>"]}},
}
ENV = {"ACME_SECRET": "s1 s2", "BILLING_TOKEN": "tok"}


def with_change(path: str, value: Any) -> dict[str, Any]:
    """GOOD with one key replaced (or removed, for value=...)."""
    import copy

    doc = copy.deepcopy(GOOD)
    *parents, leaf = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    if value is ...:
        node.pop(leaf, None)
    else:
        node[leaf] = value
    return doc


def test_good_config_parses_with_env_secrets_and_overrides() -> None:
    env = {**ENV, "GATEWAY_DATABASE_URL": "postgresql://db.internal/prod"}
    s = settings.parse(GOOD, env)
    assert s.database_url == "postgresql://db.internal/prod"
    assert s.providers["acme"].params.secrets == ("s1", "s2")
    assert s.providers["stripe"].params.secrets == ("whsec_a", "whsec_b")
    assert s.services["billing"].token == "tok"
    assert "tok" not in repr(s.services["billing"])


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        ("providers.stripe.scheme", "stripey", "providers.stripe.scheme"),
        ("providers.stripe.scheme", ..., "providers.stripe.scheme"),
        ("providers.stripe.secrets", ..., "providers.stripe.secrets"),
        ("providers.stripe.secrets", "whsec_a", "providers.stripe.secrets"),
        ("providers.stripe.tolerance_s", -5, "providers.stripe.tolerance_s"),
        ("providers.stripe.tolerance_s", "300", "providers.stripe.tolerance_s"),
        ("providers.acme.secret_env", "NOT_SET_ANYWHERE", "providers.acme.secret_env"),
        ("providers.acme.header", ..., "providers.acme.header"),
        ("providers.acme.event_id_from", "body.id", "providers.acme.event_id_from"),
        ("providers.acme.encoding", "base32", "providers.acme.encoding"),
        (
            "providers.std",
            {"scheme": "standard", "secrets": ["whsec_!!notbase64!!"]},
            "providers.std.secrets",
        ),
        ("services.billing.token_env", "MISSING_TOKEN", "services.billing.token_env"),
        ("services.billing.subjects", [], "services.billing.subjects"),
        ("http.port", 70000, "http.port"),
        ("http.port", True, "http.port"),
        ("http.max_body_bytes", 0, "http.max_body_bytes"),
        ("http.max_bodybytes", 10, "http.max_bodybytes"),
        ("database.url", "mysql://x", "database.url"),
        ("nats.url", "http://x", "nats.url"),
        ("ingest.batch_max_rows", 0, "ingest.batch_max_rows"),
        ("outbox", "fast", "outbox"),
        ("outbox.max_publish_attempts", 0, "outbox.max_publish_attempts"),
        ("nats.max_payload_bytes", -1, "nats.max_payload_bytes"),
    ],
)
def test_bad_setting_names_its_key(path: str, value: Any, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings.parse(with_change(path, value), ENV)
    assert info.value.key == key
    assert str(info.value).startswith(f"config error: {key}: ")
    assert "\n" not in str(info.value)


def test_bad_env_override_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        settings.parse(GOOD, {**ENV, "GATEWAY_NATS_URL": "localhost:4222"})
    assert info.value.key == "GATEWAY_NATS_URL"


def test_missing_or_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        settings.load(None, env={})
    assert info.value.key == "--config"
    with pytest.raises(ConfigError, match="cannot read"):
        settings.load(tmp_path / "nope.toml", env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[database\nurl=", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        settings.load(bad, env={})


def test_defaults_accept_only_what_nats_can_publish() -> None:
    """The shipped defaults are consistent: the largest accepted body plus the header
    budget fits NATS's default 1 MiB max_payload."""
    s = settings.parse({}, {})
    assert s.nats.max_payload_bytes == 1_048_576
    assert s.http.max_body_bytes + HEADER_BUDGET_BYTES <= s.nats.max_payload_bytes
    assert s.outbox.max_publish_attempts > 0


@pytest.mark.parametrize(
    ("body", "payload"),
    [
        (1_048_576, None),  # the old default against NATS's default: refused
        (1_048_415, None),  # the repro size
        (1_040_385, None),  # one byte over the budget
        (2_097_152, 2_097_152),  # raising both to the same number is not enough
    ],
)
def test_config_that_accepts_what_it_cannot_publish_is_refused(
    body: int, payload: int | None
) -> None:
    doc = with_change("http.max_body_bytes", body)
    if payload is not None:
        doc["nats"]["max_payload_bytes"] = payload
    with pytest.raises(ConfigError) as info:
        settings.parse(doc, ENV)
    assert info.value.key == "http.max_body_bytes"
    limit = payload or 1_048_576
    assert f"{body} plus {HEADER_BUDGET_BYTES}" in str(info.value)
    assert f"nats.max_payload_bytes {limit}" in str(info.value)


def test_raised_max_payload_allows_a_larger_body() -> None:
    doc = with_change("http.max_body_bytes", 8_388_608 - HEADER_BUDGET_BYTES)
    doc["nats"]["max_payload_bytes"] = 8_388_608
    assert settings.parse(doc, ENV).http.max_body_bytes == 8_388_608 - HEADER_BUDGET_BYTES
