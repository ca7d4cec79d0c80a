"""Settings: one immutable value, parsed once at start-up, with errors that name the key.

- `config`: the whole `Settings`, `parse` (a TOML document) and `load` (a file);
- `sections`: one typed section per config table (`[http]`, `[ingest]`, ...);
- `ordering`: `[ordering]`, per-key order;
- `senders`: the `[providers.*]` and `[services.*]` tables;
- `values`: reading one value, URL or section with an error that names its key.
"""

from gateway.settings.config import CONFIG_ENV, Settings, load, parse
from gateway.settings.console import ConsoleSettings
from gateway.settings.ordering import OnPoison, OrderingSettings
from gateway.settings.sections import (
    RETRY_HORIZON_S,
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
from gateway.settings.senders import SCHEME_NAMES, ProviderSettings, ServiceSettings

__all__ = [
    "CONFIG_ENV",
    "RETRY_HORIZON_S",
    "SCHEME_NAMES",
    "ConsoleSettings",
    "CurrencySettings",
    "HttpSettings",
    "IngestSettings",
    "LedgerSettings",
    "NatsSettings",
    "OnPoison",
    "OrderingSettings",
    "OutboxSettings",
    "ProviderSettings",
    "RetentionSettings",
    "ServiceSettings",
    "Settings",
    "SettlementSettings",
    "TracingSettings",
    "load",
    "parse",
]
