"""The alert receiver (`[alerts] webhook_url`): one JSON POST per notice, over httpx.

The exception text of an httpx error may include the URL, which usually carries a
credential, so only the error's type name goes into `AlertNotDelivered`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from gateway.errors import AlertNotDelivered


class AlertWebhook:
    """POSTs alert documents to one URL with a client the composition root opened."""

    def __init__(self, client: httpx.AsyncClient, url: str, timeout_s: float = 5.0) -> None:
        self._client = client
        self.url = url
        self._timeout_s = timeout_s

    async def post(self, doc: Mapping[str, Any]) -> None:
        """Deliver `doc`; `AlertNotDelivered` unless the receiver answered 2xx."""
        try:
            response = await self._client.post(self.url, json=doc, timeout=self._timeout_s)
        except httpx.HTTPError as exc:
            raise AlertNotDelivered(type(exc).__name__) from exc
        if not response.is_success:
            raise AlertNotDelivered(f"receiver answered {response.status_code}")
