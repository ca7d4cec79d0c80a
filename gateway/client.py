"""`Publisher`: the async client internal services use to publish events through the
gateway (`POST /v1/events`), retrying what is safe to retry.

Every publish carries an idempotency key, so a retry after a lost answer is recorded once
and answered `duplicate`: retrying is always safe, and the client retries timeouts,
connection errors, 408, 429 and 5xx with capped, jittered backoff, or after the delay the
gateway's `Retry-After` asks for (it sends one with every 503). One publish never takes
longer than `deadline_s` in all: a wait that would pass it gives up at once. Other 4xx
answers are the caller's to fix and raise at once.

    async with Publisher("http://gateway:8080", token=os.environ["BILLING_TOKEN"]) as pub:
        await pub.publish("payment.captured", {"settlement_id": "s_1", ...}, key="s_1")
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any

import httpx

from gateway.errors import PublishRejected, PublishUnavailable

__all__ = [
    "PublishRejected",
    "PublishResult",
    "PublishUnavailable",
    "Publisher",
    "retry_after_s",
]


@dataclass(frozen=True)
class PublishResult:
    """The gateway's answer: `accepted` the first time, `duplicate` after that."""

    status: str
    event_id: str


def backoff_s(attempt: int, base_s: float, cap_s: float, rand: Callable[[], float]) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)]."""
    return rand() * min(cap_s, base_s * 2.0**attempt)


def retry_after_s(value: str | None, now: datetime) -> float | None:
    """The wait a `Retry-After` header asks for: delay-seconds or an HTTP-date (RFC 9110
    section 10.2.3), never negative; None when absent or unreadable (backoff applies)."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # `isdigit` alone takes "²", which float() refuses
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by the RFC's rules
        return None
    return max(0.0, (when - now).total_seconds())


class Publisher:
    """Publishes events to the gateway with retries; use as an async context manager."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        attempts: int = 6,
        timeout_s: float = 10.0,
        deadline_s: float = 60.0,
        base_delay_s: float = 0.2,
        max_delay_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if deadline_s <= 0:
            raise ValueError("deadline_s must be positive")
        self._client = httpx.AsyncClient(
            base_url=base_url,
            timeout=timeout_s,
            transport=transport,
            headers={"Authorization": f"Bearer {token}"},
        )
        self._attempts = attempts
        self._timeout_s = timeout_s
        self._deadline_s = deadline_s
        self._base_delay_s = base_delay_s
        self._max_delay_s = max_delay_s

    async def __aenter__(self) -> Publisher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def publish(
        self, event_type: str, data: Mapping[str, Any], *, key: str | None = None
    ) -> PublishResult:
        """Publish `{"type": event_type, "data": data}`; `key` defaults to a new UUID.

        Pass a key derived from your own record (a payment id) so that a retry after a
        crash on your side is recognised as the same event.
        """
        key = key or str(uuid.uuid4())
        body = {"type": event_type, "data": dict(data)}
        give_up_at = time.monotonic() + self._deadline_s
        last_problem = "no attempt made"
        asked_s: float | None = None  # the last answer's Retry-After
        for attempt in range(self._attempts):
            if attempt:
                delay_s = asked_s
                if delay_s is None:
                    delay_s = backoff_s(
                        attempt, self._base_delay_s, self._max_delay_s, random.random
                    )
                if time.monotonic() + delay_s >= give_up_at:
                    raise PublishUnavailable(
                        f"gave up after {attempt} attempt(s): {last_problem}; waiting "
                        f"{delay_s:g} s more would pass the {self._deadline_s:g} s deadline"
                    )
                await asyncio.sleep(delay_s)
            remaining_s = give_up_at - time.monotonic()
            try:
                response = await self._client.post(
                    "/v1/events",
                    json=body,
                    headers={"Idempotency-Key": key},
                    timeout=min(self._timeout_s, remaining_s),
                )
            except httpx.TransportError as exc:
                last_problem, asked_s = type(exc).__name__, None
                continue
            if response.status_code == 200:
                doc = response.json()
                return PublishResult(status=doc["status"], event_id=doc["event_id"])
            if response.status_code in (408, 429) or response.status_code >= 500:
                last_problem = f"HTTP {response.status_code}"
                asked_s = retry_after_s(response.headers.get("Retry-After"), datetime.now(UTC))
                continue
            raise PublishRejected(response.status_code, response.text)
        raise PublishUnavailable(f"gave up after {self._attempts} attempts: {last_problem}")
