"""`gateway confirm`: the confirm stage's worker, wired from the settings."""

from __future__ import annotations

import asyncio

from gateway.adapters.postgres import open_pool
from gateway.confirm.sources import ConfirmSource
from gateway.confirm.worker import ConfirmWorker
from gateway.core.confirm.events import Shaping
from gateway.core.providers import get_provider
from gateway.errors import ConfigError
from gateway.ingest.endpoints import ordered_subject
from gateway.metrics import ListenAddress, Metrics, metrics_listener
from gateway.settings import Settings


def confirm_sources(settings: Settings) -> list[ConfirmSource]:
    """The configured providers whose webhooks are confirmed by a fetch."""
    ordered = ordered_subject(settings.ordering, settings.settlement)
    sources = []
    for name, provider in settings.providers.items():
        confirmation = provider.confirmation
        if confirmation is None:
            continue
        if provider.api is None or not provider.api.key:  # not read: a wiring mistake
            raise ConfigError(f"providers.{name}.api_key_env", "was not read")
        if settings.confirm.lease_s <= provider.api.limits.timeout_s:
            # A fetch outliving its lease would be claimed and made again meanwhile.
            raise ConfigError(
                "confirm.lease_s",
                f"must exceed providers.{name}.api_timeout_s "
                f"({provider.api.limits.timeout_s:g} s), got {settings.confirm.lease_s:g}",
            )
        shaping = Shaping(name, provider.event_types, provider.order_key, ordered)
        document = get_provider(provider.scheme).document
        sources.append(ConfirmSource(confirmation, provider.api, shaping, document,
                                     secrets=provider.params.secrets))  # fmt: skip
    return sources


def confirm_metrics_address(settings: Settings) -> ListenAddress:
    """Where `gateway confirm` serves /metrics, from `[confirm]`."""
    confirm = settings.confirm
    return ListenAddress(confirm.metrics_host, confirm.metrics_port, "confirm.metrics_port")


async def run_confirm(settings: Settings, listen: ListenAddress | None = None) -> None:
    """`gateway confirm`: its /metrics listener, then the worker until cancelled. With no
    provider to confirm it says so and waits (a unit may run it everywhere)."""
    metrics = Metrics()
    sources = confirm_sources(settings)
    async with (
        metrics_listener(metrics, listen or confirm_metrics_address(settings)),
        open_pool(settings.database_url, max_size=4) as pool,
    ):
        if not sources:
            await asyncio.Event().wait()
        await ConfirmWorker(pool, sources, settings.confirm, metrics).run()
