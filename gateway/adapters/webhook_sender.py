"""Sending one signed webhook over HTTP, as a provider would (`gateway sign --send`)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from gateway.errors import SendFailed


def post_webhook(
    url: str, body: bytes, headers: Mapping[str, str], timeout_s: float = 10.0
) -> tuple[int, str]:
    """POST `body` with `headers`; (status, response text), or `SendFailed` when nothing
    came back (the URL may carry a credential, so only the error's type is named)."""
    try:
        response = httpx.post(url, content=body, headers=dict(headers), timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise SendFailed(f"no answer from the URL: {type(exc).__name__}") from exc
    return response.status_code, response.text
