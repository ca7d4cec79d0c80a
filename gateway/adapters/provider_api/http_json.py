"""A GET returning JSON, with httpx errors turned into an `Answer` (no exception)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from gateway.adapters.provider_api.retrying import Answer


async def get_json(
    client: httpx.AsyncClient, url: str, params: Mapping[str, str] | None = None
) -> Answer[tuple[Any, httpx.Headers]]:
    """(status, Retry-After, (document, response headers)); a transport error or an
    unreadable 2xx body is an answer with status None (retried like a 5xx)."""
    try:
        response = await client.get(url, params=dict(params or {}))
    except httpx.TransportError as exc:
        return Answer(None, detail=type(exc).__name__)
    retry_after = response.headers.get("retry-after")
    if not 200 <= response.status_code < 300:
        return Answer(response.status_code, retry_after, detail=response.reason_phrase)
    try:
        doc = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return Answer(None, detail="the body is not JSON")
    return Answer(response.status_code, retry_after, (doc, response.headers))
