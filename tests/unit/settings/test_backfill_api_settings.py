"""A provider's backfill API settings: https only (http with `insecure_api_url`), a host
on the provider's allow-list (`api_hosts`), and the bounds of a pass; every refusal is
one line naming its key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import ConfigError
from gateway.settings.provider_api import ApiLimits, parse_provider_api

ENV = {"API_KEY": "sk_test_x"}


def parse(scheme: str = "stripe", **keys: Any) -> Any:
    data = {"api_key_env": "API_KEY", **keys}
    if scheme == "github":
        data |= {"repo": "acme/payments", "hook_id": 1}
    return parse_provider_api(scheme, data, f"providers.{scheme}.", ENV)


@pytest.mark.parametrize(
    ("scheme", "url", "hosts"),
    [
        ("stripe", "https://api.stripe.com", ("api.stripe.com",)),
        ("github", "https://api.github.com", ("api.github.com",)),
        ("paddle", "https://api.paddle.com", ("api.paddle.com", "sandbox-api.paddle.com")),
    ],
)
def test_each_provider_defaults_to_its_own_https_api(
    scheme: str, url: str, hosts: tuple[str, ...]
) -> None:
    api = parse(scheme)
    assert (api.url, api.hosts, api.insecure, api.limits) == (url, hosts, False, ApiLimits())


def test_paddle_sandbox_is_allowed_by_default() -> None:
    assert parse("paddle", api_url="https://sandbox-api.paddle.com").url.startswith("https://s")


@pytest.mark.parametrize(
    ("keys", "key", "says"),
    [
        ({"api_url": "http://api.stripe.com"}, "api_url", "insecure_api_url = true"),
        ({"api_url": "http://127.0.0.1:9", "insecure_api_url": True}, "api_url", "api_hosts"),
        ({"api_url": "https://api.stripe.com.evil.example"}, "api_url", "not in"),
        ({"api_url": "https://api.paddle.com"}, "api_url", "not in"),  # Paddle's host
        ({"api_url": "https://API.STRIPE.COM@evil.example"}, "api_url", "credentials"),
        ({"api_url": "ftp://api.stripe.com"}, "api_url", "https://"),
        ({"api_url": "https://api.stripe.com/?x=1"}, "api_url", "query"),
        ({"api_url": "https://api.stripe.com:port"}, "api_url", "not a URL"),
        ({"api_hosts": ["https://api.stripe.com"]}, "api_hosts", "host names only"),
        ({"api_hosts": []}, "api_hosts", "non-empty list"),
        ({"insecure_api_url": "yes"}, "insecure_api_url", "must be bool"),
        ({"api_max_pages": 0}, "api_max_pages", "positive"),
        ({"api_max_pass_s": float("inf")}, "api_max_pass_s", "positive"),
        ({"api_max_answer_bytes": -1}, "api_max_answer_bytes", "positive"),
        ({"api_timeout_s": 0}, "api_timeout_s", "positive"),
        ({"api_max_answer_bytes": 2**28 + 1}, "api_max_answer_bytes", "at most 268435456"),
        ({"api_timeout_s": 3600.5}, "api_timeout_s", "at most 3600"),
        ({"api_page_attempts": True}, "api_page_attempts", "must be int"),
    ],
)
def test_refusals_name_the_key(keys: dict[str, Any], key: str, says: str) -> None:
    """Each is one line naming `providers.stripe.<key>`."""
    with pytest.raises(ConfigError) as refused:
        parse(**keys)
    assert refused.value.key == f"providers.stripe.{key}"
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_largest_answer_and_the_longest_deadline_are_taken() -> None:
    api = parse(api_max_answer_bytes=2**28, api_timeout_s=3600)
    assert (api.limits.max_answer_bytes, api.limits.timeout_s) == (2**28, 3600.0)


def test_a_test_api_needs_both_the_flag_and_its_host() -> None:
    api = parse(api_url="http://127.0.0.1:8111/", insecure_api_url=True, api_hosts=["127.0.0.1"])
    assert (api.url, api.insecure, api.hosts) == ("http://127.0.0.1:8111", True, ("127.0.0.1",))


def test_the_flag_never_lets_the_url_leave_the_allow_list() -> None:
    """`insecure_api_url` permits plain http; the host is still checked, case aside."""
    api = parse(api_url="https://Api.Stripe.com", api_hosts=["API.stripe.com"])
    assert api.hosts == ("api.stripe.com",)


def test_the_bounds_are_read() -> None:
    api = parse(
        api_max_pages=5,
        api_max_pass_s=30,
        api_max_answer_bytes=1024,
        api_timeout_s=2.5,
        api_page_attempts=2,
    )
    assert api.limits == ApiLimits(5, 30.0, 1024, 2.5, 2)
