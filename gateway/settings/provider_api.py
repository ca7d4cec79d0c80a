"""A provider's API credentials and where to reach it, for `gateway backfill`: the keys
`api_key_env`, `api_url`, `repo`/`org` and `hook_id` (GitHub), and the optional
`[providers.NAME.backfill]` schedule, read from the provider's own table."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import ConfigError
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
    "github": "https://api.github.com",
    "paddle": "https://api.paddle.com",
}
#: The provider keys read here (senders.PROVIDER_KEYS lists them with the rest).
API_KEYS = ("api_key_env", "api_url", "repo", "org", "hook_id", "backfill")
SCHEDULE_KEYS = ("interval_s", "window_s")
#: `owner/name` as GitHub spells repositories.
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ORG = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class BackfillSchedule:
    """`gateway serve` backfills the trailing `window_s` every `interval_s`."""

    interval_s: float
    window_s: float


@dataclass(frozen=True)
class ProviderApi:
    """How to read a provider's events back from its API (never its webhook secret)."""

    url: str
    key: str = field(repr=False)  # an API key or token: never printed
    repo: str | None = None  # GitHub: the repository hook's `owner/name` ...
    org: str | None = None  # ... or the organisation hook's organisation
    hook_id: int | None = None  # GitHub: the hook whose deliveries are read
    schedule: BackfillSchedule | None = None

    __repr__ = redacted_repr  # the URL may carry credentials too


def parse_provider_api(
    scheme: str, data: Mapping[str, Any], path: str, env: Mapping[str, str]
) -> ProviderApi | None:
    """The provider's API settings, or None when it names no `api_key_env`."""
    given = [k for k in API_KEYS if k in data]
    if not given:
        return None
    if scheme not in DEFAULT_API_URLS:
        raise ConfigError(
            f"{path}{given[0]}",
            f"backfill reads the APIs of {', '.join(DEFAULT_API_URLS)} scheme providers only",
        )
    var = read_value(data, "api_key_env", path, str, None)
    if not var:
        raise ConfigError(f"{path}api_key_env", "is required with the other api_ keys")
    key = env.get(var, "").strip()
    if not key:
        raise ConfigError(f"{path}api_key_env", f"{env_name_shown(var)} is not set")
    url = read_value(data, "api_url", path, str, DEFAULT_API_URLS[scheme]).rstrip("/")
    if url.split("://", 1)[0] not in ("http", "https") or "://" not in url:
        raise ConfigError(f"{path}api_url", "must be an http:// or https:// URL")
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
    return ProviderApi(url, key, repo, org, hook_id, _schedule(data, path))


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
