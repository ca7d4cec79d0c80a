"""`[forward.NAME]`: forwarding destinations, and `ForwardOptions`, the checked value one
forwarder runs with, whether its settings come from such a table or from the flags of
`gateway forward` (both are checked by `destination`, so they cannot disagree)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from gateway.core.events.model import MAX_DESTINATION_CHARS, is_destination_name
from gateway.core.forward.filters import ForwardFilter
from gateway.core.forward.request import ResignAs
from gateway.core.forward.retry import parse_duration_s, parse_schedule
from gateway.core.signatures import standard_key
from gateway.errors import ConfigError
from gateway.settings.secrets import EVERY_SECRET, SecretScope
from gateway.settings.values import env_name_shown, read_section, read_table, refuse_unknown

#: Events sent at once, at most (the stream's pending limit follows it).
MAX_IN_FLIGHT = 256
#: The longest timeout of one attempt: past it a target is not answering.
MAX_TIMEOUT_S = 300.0


class Output(enum.StrEnum):
    """What a person sees: one line per attempt, NDJSON, or nothing but the summary."""

    LINES = "lines"
    JSON = "json"
    QUIET = "quiet"


class Start(enum.StrEnum):
    """Where a new consumer starts in the stream (an existing durable one resumes)."""

    NOW = "now"
    START = "start"
    TIME = "time"


@dataclass(frozen=True)
class ForwardSettings:
    """A destination that `gateway forward --name NAME` delivers to,
    durably (consumer `forward-NAME`), with metrics and alerts. One process per
    destination: `deploy/systemd/gateway-forward@.service` runs `NAME`."""

    #: The target. Never logged: its query may carry a credential.
    #: default: none (required)
    #: allowed: an `http://` or `https://` URL
    url: str = ""
    #: The environment variable holding the signing secret; during a rotation, the
    #: secrets separated by spaces, the new one first (each signs).
    #: default: none (required)
    secret_env: str = ""
    #: Only these providers' events (`service:NAME` for a service's); empty: all.
    providers: tuple[str, ...] = ()
    #: Only these event types: exact, or a prefix ending in `*`; empty: all.
    types: tuple[str, ...] = ()
    #: Only bodies that contain this JSON object, as PostgreSQL's `@>` reads it.
    #: default: none (every body)
    where: str = ""
    #: Where the destination starts the first time it runs: `now`, `start` (the
    #: stream's oldest event) or an ISO 8601 time with its zone.
    start: str = Start.NOW.value
    #: One event per key in flight, in `key_seq` order; off: `max_in_flight` at once.
    ordered: bool = True
    #: Attempts under way at once.
    #: allowed: 1 to {{MAX_IN_FLIGHT}}
    max_in_flight: int = 16
    #: Seconds an attempt may take; only a 2xx within it counts.
    #: allowed: > 0, at most {{MAX_TIMEOUT_S}}
    timeout_s: float = 15.0
    #: Delays before each retry: `dev` (1 s, 5 s, 30 s), `standard` (5 s to 24 h over
    #: about three days) or a list such as `1s,10s,1m`. Each gets ±20 % jitter.
    retry: str = "standard"
    #: Whose signature a delivery carries.
    #: allowed: `standard`, `stripe`, `github`, `shopify`, `paddle`
    resign_as: str = ResignAs.STANDARD.value
    #: Wrap the body with its provider, event id, type and received-at.
    envelope: bool = False
    #: Park an event at once when the target answers a 4xx other than 408, 425 or 429.
    park_on_4xx: bool = False
    #: Allow a target whose host is or resolves to a private, loopback, link-local or
    #: metadata address (refused by default).
    allow_private: bool = False
    #: Do not verify the target's TLS certificate.
    insecure: bool = False
    #: The address the destination's `/metrics` listens on.
    metrics_host: str = "127.0.0.1"
    #: The port of the destination's `/metrics` (give each destination its own); 0: off.
    #: allowed: 0 to 65535
    metrics_port: int = 0


@dataclass(frozen=True)
class ForwardOptions:
    """Everything one forwarder runs with, checked."""

    url: str = field(repr=False)  # may carry a credential in its query: never printed
    name: str | None = None  # durable when named; ephemeral from now when not
    filters: ForwardFilter = field(default_factory=ForwardFilter)
    start: Start = Start.NOW
    start_time_iso: str | None = None  # with Start.TIME
    ordered: bool = True
    max_in_flight: int = 16
    timeout_s: float = 15.0
    schedule: tuple[float, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)
    resign_as: ResignAs = ResignAs.STANDARD
    envelope: bool = False
    output: Output = Output.LINES
    verify_tls: bool = True
    park_on_4xx: bool = False
    fail_first: int = 0  # answer as a 503 for each event's first N attempts, sending nothing
    allow_private: bool = True  # flags name their target; a config table must allow it
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    #: An unnamed destination's own suffix: two at once never share attempts or holds.
    run_id: str = ""

    @property
    def destination(self) -> str:
        """The name attempts and dead letters are filed under: `listen-RUN` unnamed."""
        return self.name or f"listen-{self.run_id or 'local'}"


def check_name(name: str) -> str:
    """A destination name; ValueError unless it is 1-64 of a-z, 0-9, `-` and `_`."""
    if not is_destination_name(name):
        raise ValueError(
            f"{name!r}: a destination name is 1-{MAX_DESTINATION_CHARS} of a-z, 0-9, '-' and '_'"
        )
    return name


def check_url(url: str) -> str:
    """An http or https URL with a host; ValueError saying what is wrong (never
    repeating the URL, which may hold a credential)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("the target must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("the target URL has no host")
    return url


def read_secrets(var: str, resign_as: ResignAs, env: Mapping[str, str]) -> tuple[str, ...]:
    """The secrets `$VAR` holds, separated by spaces, each checked where the scheme can
    tell (a Standard Webhooks secret is base64); ValueError naming the variable only."""
    found = tuple(env.get(var, "").split())
    if not found:
        raise ValueError(f"{env_name_shown(var)} is not set or empty")
    if resign_as is ResignAs.STANDARD:
        for secret in found:
            try:
                standard_key(secret)
            except ValueError as exc:
                raise ValueError(f"{env_name_shown(var)}: {exc}") from None
    return found


def read_start(text: str) -> tuple[Start, str | None]:
    """`now`, `start` or an ISO 8601 time with its zone; ValueError otherwise."""
    if text in (Start.NOW.value, Start.START.value):
        return Start(text), None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text[:40]!r} is not 'now', 'start' or an ISO 8601 time") from None
    if when.tzinfo is None:
        raise ValueError("give the time with its zone, such as 2026-12-01T09:00Z")
    return Start.TIME, when.isoformat()


def destination(
    name: str, table: ForwardSettings, env: Mapping[str, str], scope: SecretScope = EVERY_SECRET
) -> ForwardOptions:
    """A `[forward.NAME]` table as the options its forwarder runs with; `ConfigError`
    naming the first key that cannot be used. A `secret_env` outside `scope` is not
    read: no secrets, so nothing is signed with them."""
    path = f"forward.{name}."

    def check(key: str, read: Any) -> Any:
        try:
            return read()
        except ValueError as exc:
            raise ConfigError(path + key, str(exc)) from None

    try:
        check_name(name)
    except ValueError as exc:
        raise ConfigError(f"forward.{name}", str(exc)) from None
    if not table.url:
        raise ConfigError(path + "url", "is required")
    check("url", lambda: check_url(table.url))
    if not table.secret_env:
        raise ConfigError(path + "secret_env", "is required")
    resign_as = check("resign_as", lambda: ResignAs(table.resign_as))
    start, start_time = check("start", lambda: read_start(table.start))
    if not 1 <= table.max_in_flight <= MAX_IN_FLIGHT:
        raise ConfigError(path + "max_in_flight", f"must be 1 to {MAX_IN_FLIGHT}")
    if not table.timeout_s <= MAX_TIMEOUT_S:
        raise ConfigError(path + "timeout_s", f"must be at most {MAX_TIMEOUT_S:g}")
    if table.metrics_port >= 65536:
        raise ConfigError(path + "metrics_port", "must be a TCP port")
    secrets: tuple[str, ...] = ()
    if scope.reads(path + "secret_env"):
        secrets = check("secret_env", lambda: read_secrets(table.secret_env, resign_as, env))
    return ForwardOptions(
        url=table.url,
        name=name,
        filters=check(
            "where",
            lambda: ForwardFilter.parse(table.providers, table.types, table.where or None),
        ),
        start=start,
        start_time_iso=start_time,
        ordered=table.ordered,
        max_in_flight=table.max_in_flight,
        timeout_s=table.timeout_s,
        schedule=check("retry", lambda: parse_schedule(table.retry)),
        secrets=secrets,
        resign_as=resign_as,
        envelope=table.envelope,
        verify_tls=not table.insecure,
        park_on_4xx=table.park_on_4xx,
        allow_private=table.allow_private,
        metrics_host=table.metrics_host,
        metrics_port=table.metrics_port,
    )


def parse_forward(
    data: Mapping[str, Any], env: Mapping[str, str], scope: SecretScope = EVERY_SECRET
) -> dict[str, ForwardOptions]:
    """Every `[forward.NAME]` table, checked."""
    found: dict[str, ForwardOptions] = {}
    for name, table in read_table(data, "forward", "").items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"forward.{name}", "must be a table ([forward.NAME])")
        refuse_unknown(table, f"forward.{name}.", set(vars(ForwardSettings())))
        raw: ForwardSettings = read_section(
            ForwardSettings, {f"forward.{name}": table}, f"forward.{name}", zero_ok=_ZERO_OK
        )
        found[name] = destination(name, raw, env, scope)
    return found


_ZERO_OK = frozenset({"metrics_port"})


def parse_timeout_s(text: str) -> float:
    """A timeout such as `15s` or `500ms`, from 1 ms to `MAX_TIMEOUT_S`; ValueError
    otherwise."""
    value = parse_duration_s(text)
    if not 0.001 <= value <= MAX_TIMEOUT_S:
        raise ValueError(f"must be from 1ms to {MAX_TIMEOUT_S:g}s")
    return value
