"""`[providers.NAME] order_key` and `on_poison`: the scheme's keys unless the provider
names its own, `[]` for none, and a bad entry refused naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings
from gateway.errors import ConfigError
from tests.unit.settings.test_settings import ENV, with_change

STRIPE = "providers.stripe."


def provider(path: str = "", value: Any = ..., name: str = "stripe") -> settings.ProviderSettings:
    doc = with_change(path or f"{STRIPE}order_key", value)  # absent unless given
    return settings.parse(doc, ENV).providers[name]


def test_without_order_key_a_provider_gets_its_schemes_rules() -> None:
    assert [r.text for r in provider().order_key] == [
        "/data/object/payment_intent", "/data/object/id"]  # fmt: skip
    assert provider(name="acme").order_key == ()  # `hmac` has none by default
    assert provider().on_poison is None  # `[ordering] on_poison` applies


@pytest.mark.parametrize(("entries", "texts"), [
    ([], []),  # none of its events is ordered
    (["/data/object/customer"], ["/data/object/customer"]),
    (["charge.* /data/object/payment_intent", "/data/object/id"],
     ["charge.* /data/object/payment_intent", "/data/object/id"]),
])  # fmt: skip
def test_a_listed_order_key_replaces_the_default(entries: list[str], texts: list[str]) -> None:
    rules = provider(f"{STRIPE}order_key", entries).order_key
    assert [r.text for r in rules] == texts


@pytest.mark.parametrize("value", ["hold", "skip"])
def test_a_provider_may_choose_its_own_on_poison(value: str) -> None:
    assert provider(f"{STRIPE}on_poison", value).on_poison == value


@pytest.mark.parametrize(("key", "value", "why"), [
    ("order_key", "/data/id", "must be a list"),
    ("order_key", [1], "must be a list"),
    ("order_key", ["data.id"], "entry 1"),
    ("order_key", ["/ok", "refunds/*"], "entry 2"),
    ("order_key", ["in*voice /id"], "only end"),
    ("order_key", ["/a~2"], "'~'"),
    ("on_poison", "drop", "'hold' or 'skip'"),
    ("on_poison", True, "must be str"),
])  # fmt: skip
def test_a_bad_entry_is_refused_naming_the_key(key: str, value: Any, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as info:
        settings.parse(with_change(f"{STRIPE}{key}", value), ENV)
    assert info.value.key == f"{STRIPE}{key}"
    assert "\n" not in str(info.value)
