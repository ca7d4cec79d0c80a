"""A provider's API credentials and where to reach it, for `gateway backfill` and the
confirm stage (`gateway confirm`, which fetches what a Mollie classic webhook names): the keys
`api_key_env`, `api_url`, `repo`/`org` and `hook_id` (GitHub), the trust keys
(`api_hosts`, `insecure_api_url`), the bounds of a pass (`api_max_*`, `api_timeout_s`,
`api_page_attempts`), and the optional `[providers.NAME.backfill]` schedule, read from
the provider's own table.

Backfill trusts what the API answers as the provider's own word (docs/operations.md, "What
a backfilled event proves"), so the URL is held to that: `https` only (plain `http` only
with `insecure_api_url = true`, for a local test API), and a host on the provider's
allow-list, so the API key is never sent anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gateway.errors import ConfigError
from gateway.settings.secrets import EVERY_SECRET, SecretScope
from gateway.settings.values import (
    env_name_shown,
    read_table,
    read_value,
    redacted_repr,
    refuse_unknown,
    require_positive,
)

#: The public API of each scheme that has one to backfill from; tests and proxies set
#: `api_url` instead.
DEFAULT_API_URLS: Mapping[str, str] = {
    "stripe": "https://api.stripe.com",
    "stripe_thin": "https://api.stripe.com",
    "github": "https://api.github.com",
    "paddle": "https://api.paddle.com",
    "square": "https://connect.squareup.com",
    "mollie": "https://api.mollie.com",
    "gocardless": "https://api.gocardless.com",
    "zarinpal": "https://payment.zarinpal.com",
    "iyzico": "https://api.iyzipay.com",
}
#: The hosts each scheme's API may be reached at unless `api_hosts` says otherwise.
DEFAULT_API_HOSTS: Mapping[str, tuple[str, ...]] = {
    "stripe": ("api.stripe.com",),
    "stripe_thin": ("api.stripe.com",),
    "github": ("api.github.com",),
    "paddle": ("api.paddle.com", "sandbox-api.paddle.com"),
    "square": ("connect.squareup.com", "connect.squareupsandbox.com"),
    "mollie": ("api.mollie.com",),
    "gocardless": ("api.gocardless.com", "api-sandbox.gocardless.com"),
    "zarinpal": ("payment.zarinpal.com", "sandbox.zarinpal.com"),
    "iyzico": ("api.iyzipay.com", "sandbox-api.iyzipay.com"),
}
#: The provider keys read here (senders.PROVIDER_KEYS lists them with the rest).
API_KEYS = (
    #: The environment variable holding the provider's API key or token, for
    #: `gateway backfill` (a key that may read events is enough; GitHub: one that may
    #: read the hook). Required when any other `api_` key is set.
    #: default: none (backfill off)
    "api_key_env",
    #: The provider's API; the API key is sent to this host only.
    #: default: the scheme's public API: {{DEFAULT_API_URLS}}
    #: allowed: `https://` (plain `http://` only with `insecure_api_url`), on a host of
    #:     `api_hosts`, without credentials, query or fragment
    "api_url",
    #: The hosts `api_url` may name: add a proxy's or a test API's here.
    #: type: list of strings
    #: default: the scheme's own: {{DEFAULT_API_HOSTS}}
    #: allowed: host names or IP addresses, without scheme or port
    "api_hosts",
    #: `true` permits a plain `http://` `api_url`, for a local test API (logged as a
    #: warning); TLS verification is never turned off.
    "insecure_api_url",
    #: Pages one backfill pass may read; a pass that reaches it stops between pages and
    #: the next continues from its cursor.
    #: allowed: > 0
    "api_max_pages",
    #: Seconds one backfill pass may take, checked between pages and bounding each
    #: call's retries.
    #: allowed: > 0
    "api_max_pass_s",
    #: Bytes one API answer may have, decoded; a larger answer is a failed call. Up to
    #: `concurrency` of them are held at once per confirmed provider.
    #: allowed: > 0, at most 268435456 (256 MiB)
    "api_max_answer_bytes",
    #: One answer's deadline, from the request to its last byte.
    #: allowed: > 0, at most 3600
    "api_timeout_s",
    #: Passes in a row that may fail on one page before it is skipped (and alerted on).
    #: allowed: > 0
    "api_page_attempts",
    #: GitHub only: the repository hook's `owner/name` (this or `org`).
    "repo",
    #: GitHub only: the organisation hook's organisation (this or `repo`).
    "org",
    #: GitHub only (required there): the hook whose deliveries are read.
    #: allowed: > 0
    "hook_id",
    #: `gateway serve` backfills this provider on a schedule: every `interval_s`, over
    #: the trailing `window_s` (it needs the `api_` keys).
    #: type: table
    #: default: none (no scheduled backfill)
    "backfill",
)
SCHEDULE_KEYS = (
    #: Seconds between scheduled passes.
    #: default: none (required)
    #: allowed: > 0
    "interval_s",
    #: Each pass reads the trailing window of this many seconds, as `gateway backfill
    #: NAME --since` that long ago would.
    #: default: twice `interval_s` (so a pass that failed is covered by the next)
    #: allowed: at least `interval_s`
    "window_s",
)
#: `owner/name` as GitHub spells repositories.
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ORG = re.compile(r"[A-Za-z0-9_.-]+")
#: A host name or an IP address as `api_hosts` lists it (an IPv6 one without brackets).
_HOST = re.compile(r"[A-Za-z0-9_.-]+|[0-9A-Fa-f:]+")


@dataclass(frozen=True)
class BackfillSchedule:
    """`gateway serve` backfills the trailing `window_s` every `interval_s`."""

    interval_s: float
    window_s: float


#: The largest `api_max_answer_bytes` and `api_timeout_s` accepted.
MAX_ANSWER_BYTES_MAX = 256 * 1024 * 1024
TIMEOUT_S_MAX = 3600


@dataclass(frozen=True)
class ApiLimits:
    """What one backfill pass may spend on the provider's API. A pass that reaches
    `max_pages` or `max_pass_s` stops between pages and the next continues from its
    cursor; an answer past `max_answer_bytes` or `timeout_s` is a failed call."""

    max_pages: int = 1000  # pages per pass: 100,000 Stripe or GitHub events
    max_pass_s: float = 3600.0
    # A GitHub delivery may be 25 MB, more than NATS can carry anyway (max_body_bytes).
    max_answer_bytes: int = 16 * 1024 * 1024
    timeout_s: float = 60.0  # one answer, from the request to its last byte
    page_attempts: int = 3  # passes failing on one page before it is skipped


@dataclass(frozen=True)
class ProviderApi:
    """How to read a provider's events back from its API (never its webhook secret)."""

    url: str
    key: str = field(repr=False)  # an API key or token: never printed
    repo: str | None = None  # GitHub: the repository hook's `owner/name` ...
    org: str | None = None  # ... or the organisation hook's organisation
    hook_id: int | None = None  # GitHub: the hook whose deliveries are read
    schedule: BackfillSchedule | None = None
    hosts: tuple[str, ...] = ()  # the allow-list `url`'s host was checked against
    insecure: bool = False  # `insecure_api_url = true`: plain http was allowed
    limits: ApiLimits = field(default_factory=ApiLimits)

    __repr__ = redacted_repr  # the URL may carry credentials too


def parse_provider_api(
    scheme: str,
    data: Mapping[str, Any],
    path: str,
    env: Mapping[str, str],
    scope: SecretScope = EVERY_SECRET,
) -> ProviderApi | None:
    """The provider's API settings, or None when it names no `api_key_env`; its key is
    empty (refused by the provider) when `scope` does not read it."""
    given = [k for k in API_KEYS if k in data]
    if not given:
        return None
    if scheme not in DEFAULT_API_URLS:
        raise ConfigError(
            f"{path}{given[0]}",
            "backfill and the confirm stage read the APIs of "
            f"{', '.join(DEFAULT_API_URLS)} scheme providers only",
        )
    var = read_value(data, "api_key_env", path, str, None)
    if not var:
        raise ConfigError(f"{path}api_key_env", "is required with the other api_ keys")
    read = scope.reads(f"{path}api_key_env")
    key = env.get(var, "").strip() if read else ""
    if not key and read:
        raise ConfigError(f"{path}api_key_env", f"{env_name_shown(var)} is not set")
    insecure = read_value(data, "insecure_api_url", path, bool, False)
    hosts = _hosts(data, path, scheme)
    url = _api_url(data, path, scheme, insecure, hosts)
    repo = read_value(data, "repo", path, str, None)
    org = read_value(data, "org", path, str, None)
    hook_id = read_value(data, "hook_id", path, int, None)
    if scheme == "github":
        if (repo is None) == (org is None):
            raise ConfigError(f"{path}repo", "GitHub backfill needs repo = 'owner/name' or org")
        if repo is not None and not _REPO.fullmatch(repo):
            raise ConfigError(f"{path}repo", "must be 'owner/name'")
        if org is not None and not _ORG.fullmatch(org):
            raise ConfigError(f"{path}org", "must be an organisation's login")
        if hook_id is None:
            raise ConfigError(f"{path}hook_id", "is required for GitHub backfill")
        require_positive(hook_id, f"{path}hook_id")
    else:
        for extra in ("repo", "org", "hook_id"):
            if extra in data:
                raise ConfigError(f"{path}{extra}", "is a GitHub setting")
    schedule = _schedule(data, path)
    return ProviderApi(url, key, repo, org, hook_id, schedule, hosts, insecure, _limits(data, path))


def _hosts(data: Mapping[str, Any], path: str, scheme: str) -> tuple[str, ...]:
    hosts = read_value(data, "api_hosts", path, tuple, ("",))
    if hosts == ("",):
        return DEFAULT_API_HOSTS[scheme]
    for host in hosts:
        if not _HOST.fullmatch(host):
            raise ConfigError(
                f"{path}api_hosts", f"must list host names only (no scheme or port), got {host!r}"
            )
    return tuple(h.lower() for h in hosts)


def _api_url(
    data: Mapping[str, Any], path: str, scheme: str, insecure: bool, hosts: tuple[str, ...]
) -> str:
    """`api_url`, held to https (or http with `insecure_api_url`) and the allow-list."""
    url = str(read_value(data, "api_url", path, str, DEFAULT_API_URLS[scheme])).rstrip("/")
    key = f"{path}api_url"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number
    except ValueError:
        raise ConfigError(key, "is not a URL") from None
    if parts.scheme == "http" and not insecure:
        raise ConfigError(
            key,
            "must be https:// (the API key and the events travel over it); plain http:// "
            f"is allowed only with {path}insecure_api_url = true, for a local test API",
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(key, "must be an https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(key, "must not carry credentials (the key comes from api_key_env)")
    if parts.query or parts.fragment:
        raise ConfigError(key, "must not have a query or a fragment")
    if parts.hostname.lower() not in hosts:
        raise ConfigError(
            key,
            f"host {parts.hostname!r} is not in {path}api_hosts ({', '.join(hosts)}); "
            "the API key is sent to api_url's host only, so list it there to allow it",
        )
    return url


def _limits(data: Mapping[str, Any], path: str) -> ApiLimits:
    d = ApiLimits()
    limits = ApiLimits(
        max_pages=read_value(data, "api_max_pages", path, int, d.max_pages),
        max_pass_s=read_value(data, "api_max_pass_s", path, float, d.max_pass_s),
        max_answer_bytes=read_value(data, "api_max_answer_bytes", path, int, d.max_answer_bytes),
        timeout_s=read_value(data, "api_timeout_s", path, float, d.timeout_s),
        page_attempts=read_value(data, "api_page_attempts", path, int, d.page_attempts),
    )
    for name, value in (
        ("api_max_pages", limits.max_pages),
        ("api_max_pass_s", limits.max_pass_s),
        ("api_max_answer_bytes", limits.max_answer_bytes),
        ("api_timeout_s", limits.timeout_s),
        ("api_page_attempts", limits.page_attempts),
    ):
        require_positive(value, f"{path}{name}")
    for name, value, most in (
        ("api_max_answer_bytes", limits.max_answer_bytes, MAX_ANSWER_BYTES_MAX),
        ("api_timeout_s", limits.timeout_s, TIMEOUT_S_MAX),
    ):
        if value > most:  # a typo's extra zeros would hold that much in memory, or wait
            raise ConfigError(f"{path}{name}", f"must be at most {most}, got {value}")
    return limits


def _schedule(data: Mapping[str, Any], path: str) -> BackfillSchedule | None:
    if "backfill" not in data:
        return None
    table = read_table(data, "backfill", path)
    sub = f"{path}backfill."
    refuse_unknown(table, sub, SCHEDULE_KEYS)
    interval_s = read_value(table, "interval_s", sub, float, None)
    if interval_s is None:
        raise ConfigError(f"{sub}interval_s", "is required")
    require_positive(interval_s, f"{sub}interval_s")
    # By default each pass looks back over two intervals, so a pass that failed once is
    # covered by the next.
    window_s = read_value(table, "window_s", sub, float, 2 * interval_s)
    require_positive(window_s, f"{sub}window_s")
    if window_s < interval_s:
        raise ConfigError(f"{sub}window_s", "must be at least interval_s (else gaps)")
    return BackfillSchedule(interval_s, window_s)
