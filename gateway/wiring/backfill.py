"""`gateway backfill PROVIDER`: traces (when `[tracing]` is on), the database, the
provider's API client and a one-shot JetStream publisher, opened for one run and closed
in reverse order. `gateway serve`'s scheduled passes trace through serve's own set-up."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime

from gateway import tracing
from gateway.adapters.jetstream.one_shot import open_one_shot_publisher
from gateway.adapters.postgres import Pool, open_pool
from gateway.adapters.provider_api import EventSource
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock
from gateway.backfill.run import BackfillParts, BackfillReport, backfill
from gateway.core.backfill.decisions import make_window
from gateway.errors import BackfillUsageError
from gateway.ingest.endpoints import ordered_subject
from gateway.metrics import Metrics
from gateway.settings import ProviderSettings, Settings

log = logging.getLogger(__name__)


def warn_if_insecure(provider: ProviderSettings) -> None:
    """The start-up warning owed by `insecure_api_url = true`."""
    if provider.api is not None and provider.api.insecure:
        log.warning(
            "backfill may read this provider's API over plain http "
            "(insecure_api_url = true): for a local test API only",
            extra={
                "provider": provider.name,
                "setting": f"providers.{provider.name}.insecure_api_url",
            },
        )


def provider_for_backfill(settings: Settings, name: str) -> ProviderSettings:
    """The provider called `name`, which must have its API configured."""
    provider = settings.providers.get(name)
    if provider is None:
        known = ", ".join(sorted(settings.providers)) or "none"
        raise BackfillUsageError(f"no provider {name!r} in the configuration (known: {known})")
    if provider.api is None:
        raise BackfillUsageError(
            f"providers.{name} has no API settings: set api_key_env (and, for GitHub, "
            "repo or org and hook_id)"
        )
    return provider


def open_source(provider: ProviderSettings, clock: Clock = REAL_CLOCK) -> EventSource:
    """The provider's API client by scheme (`provider.api` must be set)."""
    api = provider.api
    if api is None:
        raise BackfillUsageError(f"providers.{provider.name} has no API settings")
    if provider.scheme == "stripe":
        from gateway.adapters.provider_api.stripe_events import StripeEvents

        return StripeEvents(api, clock)
    if provider.scheme == "github":
        from gateway.adapters.provider_api.github_deliveries import GitHubDeliveries

        return GitHubDeliveries(api, clock)
    if provider.scheme == "paddle":
        from gateway.adapters.provider_api.paddle_events import PaddleEvents

        return PaddleEvents(api, clock)
    if provider.scheme == "square":
        from gateway.adapters.provider_api.square_events import SquareEvents

        return SquareEvents(api, clock)
    if provider.scheme == "gocardless":
        from gateway.adapters.provider_api.gocardless_events import GoCardlessEvents

        return GoCardlessEvents(api, clock)
    if provider.scheme == "zarinpal":
        from gateway.adapters.provider_api.zarinpal_unverified import ZarinpalUnverified

        return ZarinpalUnverified(api, provider.params, clock)
    raise BackfillUsageError(f"cannot backfill a {provider.scheme!r} scheme provider")


@contextlib.asynccontextmanager
async def backfill_parts(
    settings: Settings, name: str, metrics: Metrics | None = None
) -> AsyncIterator[BackfillParts]:
    """Opened in order: the database, the API client, the publisher (which connects on
    its first recovered event); closed in reverse."""
    provider = provider_for_backfill(settings, name)
    warn_if_insecure(provider)
    async with open_pool(settings.database_url, max_size=2) as pool:
        source = open_source(provider)
        try:
            async with open_one_shot_publisher(settings.nats, "gateway-backfill") as publisher:
                yield BackfillParts(
                    pool,
                    source,
                    provider,
                    metrics or Metrics(),
                    publisher,
                    max_body_bytes=settings.http.max_body_bytes,
                    ordered=ordered_subject(settings.ordering, settings.settlement),
                )
        finally:
            await source.close()


def scheduled_parts(
    settings: Settings, pool: Pool, metrics: Metrics
) -> Callable[[str], contextlib.AbstractAsyncContextManager[BackfillParts]]:
    """What each scheduled pass of `gateway serve` opens: the API client and a one-shot
    publisher, over the serving process's own pool and metrics; closed after the pass.
    Called once at start-up, when it warns of any `insecure_api_url`."""
    for provider in settings.providers.values():
        if provider.api is not None and provider.api.schedule is not None:
            warn_if_insecure(provider)

    @contextlib.asynccontextmanager
    async def opened(name: str) -> AsyncIterator[BackfillParts]:
        provider = provider_for_backfill(settings, name)
        source = open_source(provider)
        try:
            async with open_one_shot_publisher(settings.nats, "gateway-backfill") as publisher:
                yield BackfillParts(
                    pool,
                    source,
                    provider,
                    metrics,
                    publisher,
                    max_body_bytes=settings.http.max_body_bytes,
                    ordered=ordered_subject(settings.ordering, settings.settlement),
                )
        finally:
            await source.close()

    return opened


async def run_backfill(
    settings: Settings,
    name: str,
    *,
    since: datetime,
    until: datetime | None,
    types: list[str],
    now: datetime,
    dry_run: bool = False,
    rate_per_s: float | None = None,
) -> BackfillReport:
    """`gateway backfill`: one run over [since, until); its spans flushed last."""
    window = make_window(since, until, types, now)
    async with (
        tracing.configured(settings.tracing, "gateway-backfill"),
        backfill_parts(settings, name) as parts,
    ):
        return await backfill(parts, window, dry_run=dry_run, rate_per_s=rate_per_s)
