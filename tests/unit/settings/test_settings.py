"""Configuration: a bad or missing setting stops start-up with one line naming the key."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from gateway import settings
from gateway.errors import ConfigError
from gateway.settings.sections import HEADER_BUDGET_BYTES
from tests.support.config_file import with_urls

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
        ("services.billing", "tok", "services.billing"),
        ("providers.stripe", ["whsec_a"], "providers.stripe"),
        # scopes: inside events.{service}. and able to match something
        ("services.billing.subjects", ["events.*.>"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.>"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.audit.>"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.billing"], "services.billing.subjects"),
        ("services.billing.subjects", ["webhooks.billing.>"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.billing.>.x"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.billing..x"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.billing.a b"], "services.billing.subjects"),
        ("services.billing.subjects", ["events.billing.a", 7], "services.billing.subjects"),
        # one token, one service
        (
            "services.audit",
            {"token_env": "BILLING_TOKEN", "subjects": ["events.audit.>"]},
            "services.audit.token_env",
        ),
        (
            "services.audit",
            {"token": "tok", "subjects": ["events.audit.>"]},
            "services.audit.token",
        ),
        ("http.port", 70000, "http.port"),
        ("http.port", True, "http.port"),
        ("http.admin_port", 65536, "http.admin_port"),
        ("http.admin_port", 8080, "http.admin_port"),
        ("http.admin_port", -1, "http.admin_port"),
        ("outbox.relay_metrics_port", 65536, "outbox.relay_metrics_port"),
        ("outbox.relay_metrics_port", -1, "outbox.relay_metrics_port"),
        ("outbox.relay_metrics_host", 9103, "outbox.relay_metrics_host"),
        ("outbox.relay_metrics_prot", 9103, "outbox.relay_metrics_prot"),
        ("settlement.metrics_port", 70000, "settlement.metrics_port"),
        ("settlement.metrics_host", ["0.0.0.0"], "settlement.metrics_host"),
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


STRIPE_TABLE = {"scheme": "stripe", "secrets": ["whsec_x"]}


def service_table(name: str) -> dict[str, Any]:
    return {"token": f"token-of-{name}", "subjects": [f"events.{name}.>"]}


@pytest.mark.parametrize(
    ("table", "name", "key"),
    [
        # a dot would make service `a.b` publish where service `a` does
        ("services", "billing.x", 'services."billing.x"'),
        # a colon could give two senders one `Nats-Msg-Id` (`{provider}:{event_id}`)
        ("services", "a:b", 'services."a:b"'),
        ("providers", "a:b", 'providers."a:b"'),
        # anything the subject rule rewrites would share a subject with another name
        ("services", "caf\u00e9", 'services."caf\\u00e9"'),
        ("providers", "caf\u00e9", 'providers."caf\\u00e9"'),
        ("services", "a b", 'services."a b"'),
        ("services", "a*", 'services."a*"'),
        ("services", "", 'services.""'),
        ("services", "-", 'services."-"'),
        ("services", "line\nbreak", 'services."line\\nbreak"'),
        # internal events are recorded as provider `service:{name}`
        ("providers", "service", "providers.service"),
    ],
)
def test_a_bad_sender_name_is_refused_naming_it_quoted(table: str, name: str, key: str) -> None:
    """Provider and service names are one NATS subject token each, of ASCII letters,
    digits, `-` and `_`; the error quotes the name as TOML would, on one line."""
    doc = with_change(table, {name: STRIPE_TABLE if table == "providers" else service_table(name)})
    with pytest.raises(ConfigError) as info:
        settings.parse(doc, ENV)
    assert info.value.key == key
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["a", "A-1", "billing_v2", "-x", "9"])
def test_a_good_service_name_publishes_under_its_own_scope(name: str) -> None:
    doc = with_change(f"services.{name}", service_table(name))
    assert settings.parse(doc, ENV).services[name].subjects == (f"events.{name}.>",)


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


# --- secrets stay out of repr, str and error messages ---------------------------------------

#: Every secret below contains this, so one substring check covers them all.
MARK = "S3CR3T"
STANDARD_KEY = base64.b64encode(f"standard-{MARK}-key".encode()).decode()
SECRETS_DOC: dict[str, Any] = {
    "database": {"url": f"postgresql://gateway:db-{MARK}@db.internal:5432/gateway"},
    "nats": {"url": f"nats://nats-{MARK}@n1:4222,nats://user:pw-{MARK}@n2:4222"},
    "redis": {"url": f"redis://:redis-{MARK}@cache:6379/0"},
    "currency": {"url": f"https://fx:fx-{MARK}@fx.internal"},
    "providers": {
        "stripe": {"scheme": "stripe", "secrets": [f"whsec_inline-{MARK}", f"whsec_old-{MARK}"]},
        "std": {"scheme": "standard", "secrets": [f"whsec_{STANDARD_KEY}"]},
        "acme": {
            "scheme": "hmac",
            "secret_env": "ACME_SECRET",
            "header": "X-Sig",
            "event_id_from": "header:X-Id",
            "event_type_from": "json:kind",
        },
    },
    "services": {
        "billing": {"token": f"billing-{MARK}", "subjects": ["events.billing.>"]},
        "audit": {"token_env": "AUDIT_TOKEN", "subjects": ["events.audit.>"]},
    },
}
SECRETS_ENV = {"ACME_SECRET": f"acme-{MARK}", "AUDIT_TOKEN": f"audit-{MARK}"}


def test_no_settings_object_prints_a_secret() -> None:
    """repr and str of the settings and of everything they hold show no secret, token or
    URL password, yet still say which hosts and names are configured."""
    s = settings.parse(SECRETS_DOC, SECRETS_ENV)
    assert s.providers["stripe"].params.secrets[0] == f"whsec_inline-{MARK}"  # still usable
    assert s.services["audit"].token == f"audit-{MARK}"
    assert s.database_url.startswith("postgresql://gateway:db-")
    objects: list[object] = [s, s.nats, s.currency, s.http, s.ingest, s.outbox, s.ledger]
    for provider in s.providers.values():
        objects += [provider, provider.params]
    objects += list(s.services.values())
    for obj in objects:
        for text in (repr(obj), str(obj), f"{obj}", f"{obj!r}"):
            assert MARK not in text and STANDARD_KEY not in text, text
    whole = repr(s)
    for shown in ("db.internal:5432", "n1:4222", "n2:4222", "cache:6379", "fx.internal"):
        assert f"***@{shown}" in whole
    assert "ServiceSettings(name='billing', subjects=('events.billing.>',))" in whole
    assert "name='acme', scheme='hmac'" in whole


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        ("services.billing.token", 4_204_242_123, "services.billing.token"),
        ("services.billing.token", [f"tok-{MARK}"], "services.billing.token"),
        ("services.billing.token_env", 4_204_242_123, "services.billing.token_env"),
        # a secret pasted where its variable's name belongs
        ("services.billing.token_env", f"tok_{MARK}", "services.billing.token_env"),
        ("providers.stripe.secret_env", f"whsec_{MARK}", "providers.stripe.secret_env"),
        ("providers.stripe.secrets", f"whsec_{MARK}", "providers.stripe.secrets"),
        ("providers.stripe.secrets", [f"whsec_{MARK}", 4_204_242_123], "providers.stripe.secrets"),
        ("providers.std", {"scheme": "standard", "secrets": [f"whsec_!{MARK}"]},
         "providers.std.secrets"),
        ("database.url", f"mysql://u:{MARK}@h/db", "database.url"),
        # the same token twice: the error names both services, not the token
        ("services.audit", {"token": f"billing-{MARK}", "subjects": ["events.audit.>"]},
         "services.audit.token"),
    ],
)  # fmt: skip
def test_a_config_error_never_repeats_a_secret(path: str, value: Any, key: str) -> None:
    """Whatever was wrong with a secret or token, the one-line error names its key and
    not its value (a mistyped number is a token too)."""
    doc = with_change(path, value)
    doc["services"]["billing"] = {"token": f"billing-{MARK}", "subjects": ["events.billing.>"]}
    if path.startswith("services.billing"):
        *_, leaf = path.split(".")
        doc["services"]["billing"] = {leaf: value, "subjects": ["events.billing.>"]}
    with pytest.raises(ConfigError) as info:
        settings.parse(doc, ENV)
    assert info.value.key == key
    assert MARK not in str(info.value) and "4204242123" not in str(info.value)


def test_an_unset_variable_with_a_conventional_name_is_named() -> None:
    """A name spelt like an environment variable is safe to repeat, and helps."""
    with pytest.raises(ConfigError, match="environment variable MISSING_TOKEN is not set"):
        settings.parse(with_change("services.billing.token_env", "MISSING_TOKEN"), ENV)


def test_defaults_accept_only_what_nats_can_publish() -> None:
    """The shipped defaults are consistent: the largest accepted body plus the header
    budget fits NATS's default 1 MiB max_payload."""
    s = settings.parse(with_urls({}), {})
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
