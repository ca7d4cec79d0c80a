"""Which providers `gateway confirm` fetches for, and the start-up rules it holds them to."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import settings as settings_mod
from gateway.errors import ConfigError
from gateway.wiring.confirm import confirm_sources
from tests.support.config_file import with_urls

ENV = {"MOLLIE_KEY": "test_key"}
MOLLIE = {"scheme": "mollie", "api_key_env": "MOLLIE_KEY"}


def settings(confirm: dict[str, Any], **mollie: Any) -> settings_mod.Settings:
    doc = with_urls({"providers": {"mollie": {**MOLLIE, **mollie},
                                   "stripe": {"scheme": "stripe", "secrets": ["whsec_x"]}},
                     "confirm": confirm})  # fmt: skip
    return settings_mod.parse(doc, env=ENV)


def test_only_the_providers_whose_webhooks_are_confirmed_are_fetched_for() -> None:
    (source,) = confirm_sources(settings({}))
    assert source.shaping.provider == "mollie"
    assert source.api.url == "https://api.mollie.com" and source.api.key == "test_key"


@pytest.mark.parametrize(("lease_s", "timeout_s"), [(60, 60), (30, 60), (10, 20)])
def test_a_lease_no_longer_than_a_fetch_may_take_stops_start_up(
    lease_s: float, timeout_s: float
) -> None:
    """A fetch outliving its lease would be claimed and made a second time meanwhile."""
    with pytest.raises(ConfigError) as refused:
        confirm_sources(settings({"lease_s": lease_s}, api_timeout_s=timeout_s))
    assert refused.value.key == "confirm.lease_s"
    assert f"providers.mollie.api_timeout_s ({timeout_s:g} s)" in str(refused.value)


def test_a_lease_longer_than_the_fetch_deadline_is_accepted() -> None:
    assert confirm_sources(settings({"lease_s": 21}, api_timeout_s=20))


def test_a_mollie_provider_without_an_api_key_stops_start_up() -> None:
    doc = with_urls({"providers": {"mollie": {"scheme": "mollie"}}})
    with pytest.raises(ConfigError) as refused:
        settings_mod.parse(doc, env={})
    assert refused.value.key == "providers.mollie.api_key_env"
