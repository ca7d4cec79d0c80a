"""One API call with the backfill's retry rules (`core.backfill.decisions.next_wait_s`).

The clock, the sleep and the randomness are parameters, so tests drive the schedule
without waiting; the adapters pass a call that answers (status, Retry-After, value).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from gateway.client import retry_after_s
from gateway.core.backfill.decisions import (
    DEFAULT_API_RETRY,
    ApiRetryPolicy,
    Verdict,
    next_wait_s,
    verdict,
)
from gateway.errors import ProviderApiAuth, ProviderApiRefused, ProviderApiUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Answer(Generic[T]):
    """What one HTTP exchange gave: its status (None: no answer), `Retry-After` as
    sent, and the value when it succeeded."""

    status: int | None
    retry_after: str | None = None
    value: T | None = None
    detail: str = ""


@dataclass(frozen=True)
class Clock:
    """Time and waiting, injectable."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rand: Callable[[], float] = random.random


REAL_CLOCK = Clock()


async def call_api(
    call: Callable[[], Awaitable[Answer[T]]],
    what: str,
    *,
    policy: ApiRetryPolicy = DEFAULT_API_RETRY,
    clock: Clock = REAL_CLOCK,
) -> T:
    """Call until it succeeds; raise `ProviderApiAuth` (401/403), `ProviderApiRefused`
    (another 4xx) or `ProviderApiUnavailable` (429/5xx/no answer past the deadline)."""
    started = clock.monotonic()
    attempt = 0
    while True:
        answer = await call()
        kind = verdict(answer.status)
        if kind is Verdict.OK:
            if answer.value is None:
                raise ProviderApiRefused(f"{what}: empty answer")
            return answer.value
        if kind is Verdict.AUTH:
            raise ProviderApiAuth(
                f"{what}: the API answered {answer.status}: the credentials in api_key_env "
                "were refused or lack permission"
            )
        if kind is Verdict.FAIL:
            raise ProviderApiRefused(f"{what}: the API answered {answer.status} {answer.detail}")
        attempt += 1
        asked = retry_after_s(answer.retry_after, datetime.now(UTC))
        wait_s = next_wait_s(policy, attempt, asked, clock.monotonic() - started, clock.rand)
        shown = answer.status if answer.status is not None else "no answer"
        if wait_s is None:
            raise ProviderApiUnavailable(
                f"{what}: still failing ({shown}) after {attempt} tries and "
                f"{clock.monotonic() - started:.0f} s"
            )
        log.warning(
            "provider API call failed; retrying",
            extra={"call": what, "status": shown, "attempt": attempt, "wait_s": round(wait_s, 3)},
        )
        await clock.sleep(wait_s)
