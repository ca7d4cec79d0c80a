"""The currency-service client of `gateway settle`, telling the dependency watch whether
the service answered (`gateway.dependency_watch`)."""

from __future__ import annotations

import httpx

from gateway.adapters.currency import CurrencyClient
from gateway.core.currency import Rate
from gateway.core.health.dependencies import Dependency
from gateway.dependency_watch import DependencyWatch
from gateway.errors import ErrorClass, GatewayError, RateServiceUnavailable


class WatchedCurrencyClient(CurrencyClient):
    """The currency-service client, telling the watch whether the service answered."""

    def __init__(
        self, watch: DependencyWatch, http: httpx.AsyncClient, base_url: str, *, timeout_s: float
    ) -> None:
        super().__init__(http, base_url, timeout_s=timeout_s)
        self._watch = watch

    async def fetch(self, base: str, quote: str) -> Rate:
        try:
            rate = await super().fetch(base, quote)
        except RateServiceUnavailable:
            self._watch.failed(
                Dependency.CURRENCY_SERVICE, ErrorClass.RATE_SERVICE_UNAVAILABLE.value
            )
            raise
        except GatewayError:  # UnsupportedPair: it answered
            self._watch.answered(Dependency.CURRENCY_SERVICE)
            raise
        self._watch.answered(Dependency.CURRENCY_SERVICE)
        return rate
