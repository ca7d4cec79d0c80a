"""The whole configuration: `Settings`, `parse` (a TOML document) and `load` (a file).

The TOML file holds everything; connection URLs can be overridden by environment
variables so the same file serves several environments. Secrets may be written inline
(development) or named by `secret_env` / `token_env` (production).
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gateway.core.health.alerting import AlertSettings
from gateway.errors import ConfigError
from gateway.settings.confirm import ConfirmSettings, parse_confirm
from gateway.settings.console import ConsoleSettings
from gateway.settings.database import DatabaseSettings
from gateway.settings.dlq import DlqSettings, parse_dlq
from gateway.settings.forward import ForwardOptions, parse_forward
from gateway.settings.ordering import OnPoison, OrderingSettings, gap_outlasts_retries
from gateway.settings.secrets import EVERY_SECRET, SecretScope
from gateway.settings.sections import (
    HEADER_BUDGET_BYTES,
    MAX_HEADER_BYTES_RANGE,
    CurrencySettings,
    HttpSettings,
    IngestSettings,
    LedgerSettings,
    NatsSettings,
    OutboxSettings,
    RetentionSettings,
    SettlementSettings,
    TracingSettings,
)
from gateway.settings.senders import (
    ProviderSettings,
    ServiceSettings,
    parse_providers,
    parse_services,
)
from gateway.settings.values import (
    read_database_url,
    read_section,
    read_table,
    read_url,
    redacted_repr,
    refuse_unknown,
)

# Settings where zero is meaningful (turns a wait or a listener off) rather than a mistake.
_ZERO_OK = frozenset(
    {
        "batch_window_us",
        "cluster_id",
        "metrics_port",
        "relay_metrics_port",
        "jobs_metrics_port",
        "remembered_keys",
        "admin_port",
        "payload_max_age_s",
        "key_max_age_s",
        "pause_s",
        "sample_ratio",
    }
)
CONFIG_ENV = "GATEWAY_CONFIG"
#: Every table the file may hold; anything else is a typo, refused with a suggestion.
SECTIONS = (
    "database",
    "nats",
    "redis",
    "http",
    "ingest",
    "outbox",
    "providers",
    "services",
    "settlement",
    "currency",
    "ledger",
    "alerts",
    "retention",
    "tracing",
    "ordering",
    "console",
    "forward",
    "dlq",
    "confirm",
)


@dataclass(frozen=True)
class Settings:
    """The whole configuration, validated."""

    #: The PostgreSQL database that holds the events, the outbox, the dead letters and
    #: the embedded ledger. Required: there is no default address, so
    #: a gateway never records events in whatever happens to listen on 127.0.0.1.
    #: default: none (required)
    #: allowed: a `postgresql://` or `postgres://` URL
    #: env: `GATEWAY_DATABASE_URL`
    database_url: str
    nats: NatsSettings
    #: The Redis that holds `gateway settle`'s rate cache, its only use.
    #: Optional: without it the worker takes every rate from the currency-service (and
    #: says so once at start-up), so while that is down payments wait in their retries.
    #: default: none (no rate cache)
    #: allowed: a `redis://`, `rediss://` or `unix://` URL
    #: env: `GATEWAY_REDIS_URL`
    redis_url: str
    http: HttpSettings = field(default_factory=HttpSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    outbox: OutboxSettings = field(default_factory=OutboxSettings)
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    services: Mapping[str, ServiceSettings] = field(default_factory=dict)
    settlement: SettlementSettings = field(default_factory=SettlementSettings)
    currency: CurrencySettings = field(default_factory=CurrencySettings)
    ledger: LedgerSettings = field(default_factory=LedgerSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    tracing: TracingSettings = field(default_factory=TracingSettings)
    ordering: OrderingSettings = field(default_factory=OrderingSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    #: `[forward.NAME]`: the destinations `gateway forward --name NAME` runs.
    forward: Mapping[str, ForwardOptions] = field(default_factory=dict)
    dlq: DlqSettings = field(default_factory=DlqSettings)
    confirm: ConfirmSettings = field(default_factory=ConfirmSettings)

    __repr__ = redacted_repr  # connection URLs may carry passwords


def _read(cls: type, data: Mapping[str, Any], section: str, skip: tuple[str, ...] = ()) -> Any:
    """Read a section with the zero-means-off names of this file."""
    return read_section(cls, data, section, skip, zero_ok=_ZERO_OK)


def _settlement(data: Mapping[str, Any]) -> SettlementSettings:
    from gateway.core.money import account_currency  # the core's own rule for codes

    settlement: SettlementSettings = _read(SettlementSettings, data, "settlement")
    try:
        account_currency(settlement.currency)
    except ValueError as exc:
        raise ConfigError("settlement.currency", str(exc)) from None
    if settlement.balances not in ("converted", "per_currency"):
        raise ConfigError(
            "settlement.balances",
            f"must be 'converted' or 'per_currency', got {settlement.balances!r}",
        )
    return settlement


def _ledger(data: Mapping[str, Any], env: Mapping[str, str]) -> LedgerSettings:
    ledger: LedgerSettings = _read(LedgerSettings, data, "ledger")
    if ledger.backend not in ("postgres", "tigerbeetle"):
        raise ConfigError(
            "ledger.backend", f"must be 'postgres' or 'tigerbeetle', got {ledger.backend!r}"
        )
    if env.get("TIGERBEETLE_ADDRESS"):
        ledger = replace(ledger, addresses=tuple(env["TIGERBEETLE_ADDRESS"].split(",")))
    return ledger


def _alerts(data: Mapping[str, Any]) -> AlertSettings:
    alerts: AlertSettings = _read(AlertSettings, data, "alerts")
    url = alerts.webhook_url
    if url and (not url.startswith(("http://", "https://")) or not url.split("://", 1)[1]):
        # Never echo the URL: webhook URLs usually carry their credential in the path.
        raise ConfigError("alerts.webhook_url", "must be an http:// or https:// URL")
    return alerts


def _retention(data: Mapping[str, Any]) -> RetentionSettings:
    retention: RetentionSettings = _read(RetentionSettings, data, "retention")
    keys_s, payloads_s = retention.key_max_age_s, retention.payload_max_age_s
    if keys_s and payloads_s and keys_s < payloads_s:
        # Deleting the row deletes its payload too: a shorter key horizon would quietly
        # become the payload horizon.
        raise ConfigError(
            "retention.key_max_age_s",
            f"must be 0 (keys kept for ever) or at least payload_max_age_s "
            f"({payloads_s:.0f}), got {keys_s:g}",
        )
    return retention


def _ordering(data: Mapping[str, Any]) -> OrderingSettings:
    ordering: OrderingSettings = _read(OrderingSettings, data, "ordering")
    if not ordering.gap_timeout_s > 0:
        raise ConfigError(
            "ordering.gap_timeout_s", f"must be > 0 seconds, got {ordering.gap_timeout_s:g}"
        )
    if ordering.on_poison not in set(OnPoison):
        raise ConfigError(
            "ordering.on_poison", f"must be 'hold' or 'skip', got {ordering.on_poison!r}"
        )
    return ordering


#: The bounds of `[console]`'s numbers: (key, low, high).
_CONSOLE_BOUNDS = (
    ("port", 1, 65_535),
    ("session_max_s", 60, 28_800),
    ("session_idle_s", 60, 1_800),
    ("login_failures_per_min", 1, 100),
    ("bearer_failures_per_min", 1, 10_000),
    ("max_connections", 1, 10_000),
    ("jobs_metrics_port", 0, 65_535),
)


def _console(data: Mapping[str, Any]) -> ConsoleSettings:
    console: ConsoleSettings = _read(ConsoleSettings, data, "console")
    for key, low, high in _CONSOLE_BOUNDS:
        value = getattr(console, key)
        if not low <= value <= high:
            raise ConfigError(f"console.{key}", f"must be {low} to {high}, got {value}")
    origin = console.public_origin
    if origin and (not origin.startswith(("http://", "https://")) or origin.count("/") != 2):
        raise ConfigError(
            "console.public_origin",
            f"must be a scheme and host, like https://console.example.com, got {origin!r}",
        )
    for address in console.trusted_proxies:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ConfigError(
                "console.trusted_proxies", f"must be IP addresses, got {address!r}"
            ) from None
    return console


def _tracing(data: Mapping[str, Any], env: Mapping[str, str]) -> TracingSettings:
    """`[tracing]`, with the standard OpenTelemetry variables over the file."""
    tracing: TracingSettings = _read(TracingSettings, data, "tracing")
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        tracing = replace(tracing, endpoint=env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
    elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        tracing = replace(tracing, endpoint=env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    if env.get("OTEL_SERVICE_NAME"):
        tracing = replace(tracing, service_name=env["OTEL_SERVICE_NAME"])
    if env.get("OTEL_TRACES_SAMPLER_ARG"):
        try:
            ratio = float(env["OTEL_TRACES_SAMPLER_ARG"])
        except ValueError:
            raise ConfigError("OTEL_TRACES_SAMPLER_ARG", "must be a number from 0 to 1") from None
        tracing = replace(tracing, sample_ratio=ratio)
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        tracing = replace(tracing, endpoint="")
    if not 0.0 <= tracing.sample_ratio <= 1.0:
        raise ConfigError(
            "tracing.sample_ratio", f"must be from 0 to 1, got {tracing.sample_ratio:g}"
        )
    url = tracing.endpoint
    if url and (not url.startswith(("http://", "https://")) or not url.split("://", 1)[1]):
        # Never echo it: a collector URL may carry a credential.
        raise ConfigError("tracing.endpoint", "must be an http:// or https:// URL (OTLP/HTTP)")
    return tracing


def parse(
    data: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    secrets: SecretScope = EVERY_SECRET,
) -> Settings:
    """Validate a parsed TOML document; raise `ConfigError` naming the first bad key.
    Only the secrets in `secrets` are read from `env` (`gateway.settings.secrets`).

    Every section and key is checked against the known ones: a misspelt `[databse]` or
    `secert_env` stops start-up instead of silently falling back to a default.
    """
    env = os.environ if env is None else env
    refuse_unknown(data, "", SECTIONS)
    refuse_unknown(read_table(data, "redis", ""), "redis.", ("url",))
    # `[database]` holds its url (read here, kept as `database_url`) and DatabaseSettings.
    database = _read(DatabaseSettings, data, "database", skip=("url",))
    # The connection URLs first: without them nothing else can be tried.
    database_url = read_database_url(data, env)
    nats_url = read_url(data, env, "nats", ("nats", "tls"))
    # Redis only holds the rate cache, a fallback of `gateway settle`: without it the
    # worker asks the currency-service alone (and logs so at start-up).
    redis_url = read_url(data, env, "redis", ("redis", "rediss", "unix"), required=False)
    nats = replace(_read(NatsSettings, data, "nats", skip=("url",)), url=nats_url)
    if not all(u.startswith(("nats://", "tls://")) for u in nats.servers):
        raise ConfigError("nats.url", "every server must be a nats:// or tls:// URL")
    http = _read(HttpSettings, data, "http")
    for key in ("port", "admin_port"):
        if getattr(http, key) >= 65536:
            raise ConfigError(f"http.{key}", f"must be a TCP port, got {getattr(http, key)}")
    if http.admin_port == http.port:
        raise ConfigError("http.admin_port", "must differ from http.port")
    low, high = MAX_HEADER_BYTES_RANGE
    if not low <= http.max_header_bytes <= high:
        raise ConfigError(
            "http.max_header_bytes", f"must be {low} to {high}, got {http.max_header_bytes}"
        )
    if http.max_body_bytes + HEADER_BUDGET_BYTES > nats.max_payload_bytes:
        # Accepting what the broker cannot take would leave events that can never be
        # published: refuse the configuration instead.
        raise ConfigError(
            "http.max_body_bytes",
            f"{http.max_body_bytes} plus {HEADER_BUDGET_BYTES} bytes of NATS headers exceeds "
            f"nats.max_payload_bytes {nats.max_payload_bytes}; at most "
            f"{nats.max_payload_bytes - HEADER_BUDGET_BYTES}",
        )
    outbox = _read(OutboxSettings, data, "outbox")
    settlement = _settlement(data)
    for key, port in (
        ("outbox.relay_metrics_port", outbox.relay_metrics_port),
        ("settlement.metrics_port", settlement.metrics_port),
    ):
        if port >= 65536:
            raise ConfigError(key, f"must be a TCP port, got {port}")
    providers = parse_providers(data, env, secrets)
    services = parse_services(data, env, secrets)
    currency = _read(CurrencySettings, data, "currency")
    ledger = _ledger(data, env)
    ordering = _ordering(data)
    gap_outlasts_retries(ordering, settlement, currency, ledger)
    return Settings(
        database_url=database_url,
        nats=nats,
        redis_url=redis_url,
        http=http,
        ingest=_read(IngestSettings, data, "ingest"),
        outbox=outbox,
        providers=providers,
        services=services,
        settlement=settlement,
        currency=currency,
        ledger=ledger,
        alerts=_alerts(data),
        retention=_retention(data),
        tracing=_tracing(data, env),
        ordering=ordering,
        console=_console(data),
        database=database,
        forward=parse_forward(data, env, secrets),
        dlq=parse_dlq(data, _read),
        confirm=parse_confirm(data, _read),
    )


def load(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    secrets: SecretScope = EVERY_SECRET,
) -> Settings:
    """Read and validate the TOML file at `path` (or `$GATEWAY_CONFIG`), reading the
    secrets in `secrets` from the environment."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV)
    if not path:
        raise ConfigError("--config", f"no config file given (use --config PATH or {CONFIG_ENV})")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("--config", f"{path} is not valid TOML: {exc}") from None
    return parse(data, env, secrets)
