"""The confirm stage holds each bound on what the provider's API sends back, end to end
on real PostgreSQL against the stand-in Mollie API: an answer past
`api_max_answer_bytes` and a path that names another host are parked at once, an answer
slower than `api_timeout_s` is tried again until `max_attempts`, a refusal's long body
is left unread and the refusal tried again, and a `Retry-After` is waited out no longer
than `max_delay_s`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from starlette.responses import Response

from gateway import settings as settings_mod
from gateway.adapters.postgres import open_pool
from gateway.confirm.worker import ConfirmWorker
from gateway.metrics import Metrics
from gateway.wiring.confirm import confirm_sources
from tests.support.confirming import QUICK, confirming, serving
from tests.support.gateway import RunningServer, config
from tests.support.mollie_api import (
    API_KEY,
    MollieApi,
    error,
    huge,
    running_mollie_api,
    slow,
    stand_in_keys,
)
from tests.support.services import wait_until
from tests.support.settlement import fetch

KEY_ENV = "MOLLIE_TEST_KEY"
ENV = {KEY_ENV: API_KEY}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MERCHANT = {"merchant_id": "m_mollie"}
#: The answer cap of these tests: a real payment's answer is far smaller.
CAP_BYTES = 65_536


@pytest.fixture
async def api() -> Any:
    async with running_mollie_api() as running:
        yield running


@pytest.fixture
def doc(database_url: str, nats_url: str, api: MollieApi) -> Any:
    found = config(database_url, nats_url)
    found["providers"]["mollie"] = {
        "scheme": "mollie",
        **stand_in_keys(api.url, KEY_ENV),
        "api_max_answer_bytes": CAP_BYTES,
    }
    found["confirm"] = dict(QUICK, max_attempts=2)
    return found


async def webhook(server: RunningServer, payment_id: str) -> None:
    answer = await server.client.post("/webhooks/mollie", content=f"id={payment_id}", headers=FORM)
    assert (answer.status_code, answer.json()["status"]) == (200, "accepted")


async def fetches(dsn: str) -> dict[str, tuple[str, int]]:
    """Each webhook's fetch: (state, tries)."""
    rows = await fetch(
        dsn,
        "SELECT p.event_id, c.state, c.attempts FROM confirmations c"
        " JOIN processed_webhooks p ON p.id = c.webhook_id",
    )
    return {r["event_id"]: (r["state"], r["attempts"]) for r in rows}


async def dead_letters(dsn: str) -> list[tuple[str, str, str]]:
    rows = await fetch(
        dsn,
        "SELECT event_id, error_class, error_message FROM dlq_webhooks WHERE stage = 'confirm'",
    )
    return [(r["event_id"], r["error_class"], r["error_message"]) for r in rows]


def state_is(dsn: str, payment_id: str, state: str) -> Callable[[], Any]:
    async def check() -> bool:
        found = (await fetches(dsn)).get(payment_id)
        return found is not None and found[0] == state

    return check


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(huge(1 << 20), id="streamed-without-a-length"),
        pytest.param(Response(b" " * (CAP_BYTES + 1), 200), id="declared-length"),
    ],
)
async def test_an_answer_past_the_byte_cap_is_parked_at_once(
    doc: dict[str, Any], database_url: str, api: MollieApi, answer: Any
) -> None:
    """Biggest: no retry makes the answer smaller; it is parked on its first try."""
    api.pay("tr_huge", metadata=MERCHANT)
    api.answer_with("tr_huge", answer)
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        await webhook(server, "tr_huge")
        await wait_until(state_is(database_url, "tr_huge", "parked"))
    assert (await fetches(database_url))["tr_huge"] == ("parked", 1)
    ((event_id, error_class, message),) = await dead_letters(database_url)
    assert (event_id, error_class) == ("tr_huge", "CONFIRMATION_REFUSED")
    assert f"api_max_answer_bytes ({CAP_BYTES})" in message


async def test_an_answer_slower_than_the_timeout_is_tried_again_then_parked(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    """Slowest: an answer trickled over 3 s, each piece well within httpx's own read
    timeout, is no answer within `api_timeout_s = 1`; tried `max_attempts` times."""
    doc["providers"]["mollie"]["api_timeout_s"] = 1
    api.pay("tr_slow", metadata=MERCHANT)
    api.answer_with("tr_slow", slow(bytes(api.payment_response("tr_slow").body), 0.3))
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        await webhook(server, "tr_slow")
        await wait_until(state_is(database_url, "tr_slow", "parked"), 15.0)
    assert (await fetches(database_url))["tr_slow"] == ("parked", 2)
    ((_, error_class, message),) = await dead_letters(database_url)
    assert error_class == "CONFIRMATION_ATTEMPTS_EXHAUSTED"
    assert "no complete answer within api_timeout_s (1 s)" in message
    assert len(api.requests) == 2


async def test_a_refusals_long_body_is_left_unread_and_the_refusal_tried_again(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    """A 503 with a megabyte of body is still a 503 (tried again), not an answer too
    large (parked)."""
    api.pay("tr_busy", metadata=MERCHANT)
    answers = iter([Response(b" " * (1 << 20), 503)])
    api.answer_with("tr_busy", lambda: next(answers, None) or api.payment_response("tr_busy"))
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        await webhook(server, "tr_busy")
        await wait_until(state_is(database_url, "tr_busy", "confirmed"))
    assert (await fetches(database_url))["tr_busy"] == ("confirmed", 2)
    assert await dead_letters(database_url) == []


@pytest.mark.parametrize(
    "retry_after",
    [
        pytest.param("3600", id="an-hour"),
        pytest.param("Fri, 31 Dec 2100 23:59:59 GMT", id="a-date"),
    ],
)
async def test_a_retry_after_is_waited_no_longer_than_the_longest_delay(
    doc: dict[str, Any], database_url: str, api: MollieApi, retry_after: str
) -> None:
    """A 429 asking for an hour (or till 2100): the next try comes after `max_delay_s`
    (0.4 s here), not then."""
    api.pay("tr_later", metadata=MERCHANT)
    answers = iter([error(429, "Too Many Requests", "slow down", {"Retry-After": retry_after})])
    api.answer_with("tr_later", lambda: next(answers, None) or api.payment_response("tr_later"))
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        await webhook(server, "tr_later")
        await wait_until(state_is(database_url, "tr_later", "confirmed"), 5.0)
    assert len(api.requests) == 2


@contextlib.asynccontextmanager
async def confirming_at(doc: dict[str, Any], path: str) -> AsyncIterator[None]:
    """`gateway confirm`'s worker whose provider module names `path` for every fetch."""
    settings = settings_mod.parse(doc, env=ENV)
    sources = [
        dataclasses.replace(
            s, confirmation=dataclasses.replace(s.confirmation, locate=lambda _: path)
        )
        for s in confirm_sources(settings)
    ]
    async with open_pool(settings.database_url, max_size=4) as pool:
        task = asyncio.create_task(ConfirmWorker(pool, sources, settings.confirm, Metrics()).run())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.parametrize(
    "path",
    ["//evil.example/v2/payments/tr_x", "https://evil.example/v2/payments/tr_x", "v2/payments"],
)
async def test_a_fetch_path_that_is_not_a_path_is_parked_and_never_requested(
    doc: dict[str, Any], database_url: str, api: MollieApi, path: str
) -> None:
    """Forged: whatever a provider module were led to name, the key is only ever sent to
    `api_url`'s host."""
    api.pay("tr_elsewhere", metadata=MERCHANT)
    async with serving(doc, ENV) as server, confirming_at(doc, path):
        await webhook(server, "tr_elsewhere")
        await wait_until(state_is(database_url, "tr_elsewhere", "parked"))
    ((_, error_class, message),) = await dead_letters(database_url)
    assert error_class == "GATEWAY_ERROR"
    assert "is not a path" in message
    assert api.requests == []
