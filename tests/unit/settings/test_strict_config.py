"""Strict configuration: a misspelt section or key, anywhere, stops start-up with the key's
full path and the closest known key; `[alerts]` is read once, with the rest."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway import settings
from gateway.core.health.alerting import AlertSettings
from gateway.errors import ConfigError
from tests.unit.settings.test_settings import ENV, GOOD


def _with(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    *parents, leaf = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return doc


def _refused(doc: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        settings.parse(doc, env=ENV)
    return caught.value


# (the misspelt key as written, the value, the suggestion the error must make)
TYPOS = [
    ("databse", {"url": "postgresql://db.example/prod"}, "database"),
    ("nast", {"url": "nats://n:4222"}, "nats"),
    ("rediss", {"url": "redis://r:6379/0"}, "redis"),
    ("htpp", {"port": 8080}, "http"),
    ("ingets", {"writers": 2}, "ingest"),
    ("outbx", {"inline": False}, "outbox"),
    ("provider", {}, "providers"),
    ("service", {}, "services"),
    ("settelment", {"concurrency": 4}, "settlement"),
    ("curency", {"url": "http://fx"}, "currency"),
    ("ledgr", {"backend": "postgres"}, "ledger"),
    ("alert", {"webhook_url": "https://hooks.example/x"}, "alerts"),
    ("database.ulr", "postgresql://db.example/prod", "database.url"),
    ("redis.rul", "redis://r:6379/0", "redis.url"),
    ("nats.max_payload", 2_000_000, "nats.max_payload_bytes"),
    ("http.max_body_byte", 1000, "http.max_body_bytes"),
    ("ingest.batch_max_row", 10, "ingest.batch_max_rows"),
    ("outbox.relay_interval", 1.0, "outbox.relay_interval_s"),
    ("settlement.concurency", 4, "settlement.concurrency"),
    ("currency.timeout", 1.0, "currency.timeout_s"),
    ("ledger.backnd", "postgres", "ledger.backend"),
    ("alerts.webhok_url", "https://hooks.example/x", "alerts.webhook_url"),
    ("providers.acme.secert_env", "ACME_SECRET", "providers.acme.secret_env"),
    ("providers.stripe.tolerence_s", 60, "providers.stripe.tolerance_s"),
    ("providers.stripe.event_type", ["a.*"], "providers.stripe.event_types"),
    ("services.billing.subject", ["events.billing.>"], "services.billing.subjects"),
    ("services.billing.tokn_env", "BILLING_TOKEN", "services.billing.token_env"),
]


@pytest.mark.parametrize(("key", "value", "meant"), TYPOS, ids=[t[0] for t in TYPOS])
def test_a_typo_anywhere_is_refused_with_a_suggestion(key: str, value: Any, meant: str) -> None:
    error = _refused(_with(key, value))
    assert error.key == key
    assert str(error) == f"config error: {key}: unknown setting; did you mean {meant}?"


def test_an_unknown_key_unlike_any_other_gets_no_suggestion() -> None:
    error = _refused(_with("http.zzz", 1))
    assert str(error) == "config error: http.zzz: unknown setting"


def test_a_very_long_unknown_key_is_cut_in_the_error() -> None:
    error = _refused(_with("http." + "k" * 5000, 1))
    assert len(str(error)) < 200 and error.key.endswith("...")


def test_alerts_are_read_once_with_the_settings() -> None:
    parsed = settings.parse(
        {**GOOD, "alerts": {"webhook_url": "https://hooks.example/x", "interval_s": 5}}, env=ENV
    )
    assert parsed.alerts == AlertSettings(webhook_url="https://hooks.example/x", interval_s=5.0)
    assert settings.parse(GOOD, env=ENV).alerts == AlertSettings()


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"webhook_url": "hooks.example/x"}, "alerts.webhook_url"),
        ({"webhook_url": "ftp://hooks.example"}, "alerts.webhook_url"),
        ({"webhook_url": 5}, "alerts.webhook_url"),
        ({"interval_s": 0}, "alerts.interval_s"),
        ({"interval_s": True}, "alerts.interval_s"),
        ({"dlq_rows_max": 10.5}, "alerts.dlq_rows_max"),
        ({"retries_per_minute_max": -1}, "alerts.retries_per_minute_max"),
    ],
)
def test_a_bad_alerts_value_names_its_key_and_never_echoes_the_url(
    table: dict[str, Any], key: str
) -> None:
    error = _refused({**GOOD, "alerts": table})
    assert error.key == key
    assert "hooks.example" not in str(error)


def test_a_removed_setting_says_why_it_is_gone() -> None:
    error = _refused(_with("outbox.relay_after_s", 5.0))
    assert error.key == "outbox.relay_after_s"
    assert str(error).startswith("config error: outbox.relay_after_s: removed: the relay now")
