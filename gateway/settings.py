"""Settings: one immutable value, parsed once at start-up, with errors that name the key.

The TOML file holds everything; connection URLs can be overridden by environment
variables so the same file serves several environments. Secrets may be written inline
(development) or named by `secret_env` / `token_env` (production).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gateway.config_values import read_section, read_table, read_url
from gateway.errors import ConfigError
from gateway.sender_settings import (
    SCHEME_NAMES,
    ProviderSettings,
    ServiceSettings,
    parse_provider,
    parse_service,
)

__all__ = ["SCHEME_NAMES", "ProviderSettings", "ServiceSettings", "Settings", "load", "parse"]

# Settings where zero is meaningful (turns a wait or a listener off) rather than a mistake.
_ZERO_OK = frozenset(
    {"batch_window_us", "relay_after_s", "cluster_id", "metrics_port", "remembered_keys"}
)
CONFIG_ENV = "GATEWAY_CONFIG"


@dataclass(frozen=True)
class HttpSettings:
    """The receiver's listening address and request limits."""

    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 1_048_576
    request_timeout_s: float = 10.0
    retry_after_s: int = 5


@dataclass(frozen=True)
class IngestSettings:
    """How accepted events are committed (group commit) and queued."""

    batching: bool = True
    batch_max_rows: int = 64
    batch_window_us: int = 500
    # Enough writers that a commit is always being gathered while others wait on
    # PostgreSQL: with 2, the serving process sat idle a fifth of the time under load.
    writers: int = 4
    queue_max: int = 10_000
    commit_timeout_s: float = 5.0
    # Keys whose rows this process saw committed, so a repeat is answered without a round
    # trip (`gateway.recorded_keys`); about 135 bytes each; 0 = every repeat asks PostgreSQL.
    remembered_keys: int = 200_000


@dataclass(frozen=True)
class OutboxSettings:
    """How recorded events reach the stream.

    `inline = true`: `gateway serve` publishes rows right after their commit and its relay
    sweeps up any whose publish was not confirmed after `relay_after_s`. `inline = false`:
    `gateway serve` only records, and `gateway relay` processes publish every row (so the
    serving process spends its CPU on acceptance alone).
    """

    inline: bool = True
    relay_after_s: float = 5.0
    relay_interval_s: float = 1.0
    batch_size: int = 256
    publish_timeout_s: float = 5.0


@dataclass(frozen=True)
class NatsSettings:
    """The JetStream connection and stream."""

    url: str = "nats://127.0.0.1:4222"
    stream: str = "WEBHOOKS"
    duplicate_window_s: int = 120
    replicas: int = 1
    request_timeout_s: float = 5.0

    @property
    def servers(self) -> list[str]:
        """The seed servers: `url` may list several, comma-separated, for a cluster."""
        return [u.strip() for u in self.url.split(",") if u.strip()]


@dataclass(frozen=True)
class SettlementSettings:
    """The settlement worker: what it consumes and how it posts."""

    subjects: tuple[str, ...] = (
        "webhooks.*.payment_intent.succeeded",
        "webhooks.*.charge.refunded",
        "events.*.payment.captured",
        "events.*.payment.refunded",
    )
    currency: str = "USD"  # the ledger currency every amount is converted to
    consumer: str = "settlement"  # the durable JetStream consumer's name
    batch_size: int = 128  # messages fetched at once
    concurrency: int = 32  # messages of a batch settled one by one at the same time
    ack_wait_s: float = 30.0  # redelivery after a worker died mid-message
    metrics_port: int = 9102  # `gateway settle` serves /metrics here (0 = off)
    retry_delays_s: tuple[float, ...] = (5.0, 30.0, 120.0)  # the consumer default


@dataclass(frozen=True)
class CurrencySettings:
    """The currency-service and how long its rates stay usable from the cache."""

    url: str = "http://127.0.0.1:8090"
    max_age_s: float = 900.0
    timeout_s: float = 2.0
    retry_delays_s: tuple[float, ...] = (1.0, 5.0, 30.0)
    cache_key_prefix: str = "fx"  # Redis keys `{prefix}:{BASE}:{QUOTE}`


@dataclass(frozen=True)
class LedgerSettings:
    """Which ledger backend settles, and how to reach TigerBeetle."""

    backend: str = "postgres"  # postgres | tigerbeetle
    cluster_id: int = 0
    addresses: tuple[str, ...] = ("127.0.0.1:3000",)
    timeout_s: float = 5.0
    retry_delays_s: tuple[float, ...] = (2.0, 10.0, 60.0)


@dataclass(frozen=True)
class Settings:
    """The whole configuration, validated."""

    database_url: str
    nats: NatsSettings
    redis_url: str
    http: HttpSettings = field(default_factory=HttpSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    outbox: OutboxSettings = field(default_factory=OutboxSettings)
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    services: Mapping[str, ServiceSettings] = field(default_factory=dict)
    settlement: SettlementSettings = field(default_factory=SettlementSettings)
    currency: CurrencySettings = field(default_factory=CurrencySettings)
    ledger: LedgerSettings = field(default_factory=LedgerSettings)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


def _read(cls: type, data: Mapping[str, Any], section: str, skip: tuple[str, ...] = ()) -> Any:
    """Read a section with the zero-means-off names of this file."""
    return read_section(cls, data, section, skip, zero_ok=_ZERO_OK)


def _settlement(data: Mapping[str, Any]) -> SettlementSettings:
    from gateway.core.money import check_currency  # the core's own rule for codes

    settlement: SettlementSettings = _read(SettlementSettings, data, "settlement")
    try:
        check_currency(settlement.currency)
    except ValueError as exc:
        raise ConfigError("settlement.currency", str(exc)) from None
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


def parse(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    """Validate a parsed TOML document; raise `ConfigError` naming the first bad key."""
    env = os.environ if env is None else env
    nats_url = read_url(data, env, "nats", NatsSettings.url, ("nats", "tls"))
    nats = replace(_read(NatsSettings, data, "nats", skip=("url",)), url=nats_url)
    if not all(u.startswith(("nats://", "tls://")) for u in nats.servers):
        raise ConfigError("nats.url", "every server must be a nats:// or tls:// URL")
    http = _read(HttpSettings, data, "http")
    if http.port >= 65536:
        raise ConfigError("http.port", f"must be a TCP port, got {http.port}")
    providers = {n: parse_provider(n, t, env) for n, t in read_table(data, "providers", "").items()}
    services = {n: parse_service(n, t, env) for n, t in read_table(data, "services", "").items()}
    return Settings(
        database_url=read_url(
            data,
            env,
            "database",
            "postgresql://127.0.0.1:5432/test",
            ("postgresql", "postgres"),
        ),
        nats=nats,
        redis_url=read_url(
            data,
            env,
            "redis",
            "redis://127.0.0.1:6379/0",
            ("redis", "rediss", "unix"),
        ),
        http=http,
        ingest=_read(IngestSettings, data, "ingest"),
        outbox=_read(OutboxSettings, data, "outbox"),
        providers=providers,
        services=services,
        settlement=_settlement(data),
        currency=_read(CurrencySettings, data, "currency"),
        ledger=_ledger(data, env),
        raw=data,
    )


def load(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read and validate the TOML file at `path` (or `$GATEWAY_CONFIG`)."""
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
    return parse(data, env)
