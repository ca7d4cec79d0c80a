"""Running `gateway forward`'s loop in-process against a real database, NATS and target."""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import httpx
import orjson

from gateway import settings as settings_mod
from gateway.core.forward.retry import NAMED_SCHEDULES
from gateway.forward.view import Counts, View
from gateway.settings.forward import ForwardOptions, Output, Start
from gateway.wiring.forward import run_forward
from tests.support import vectors
from tests.support.gateway import SECRETS

#: The secret tests sign with (Standard Webhooks form, also a valid Stripe-style key).
FORWARD_SECRET = "whsec_" + "Zm9yd2FyZC10ZXN0LXNlY3JldC0xMjM0NTY3OA=="


def options(url: str, **changes: object) -> ForwardOptions:
    """A destination for tests: from the stream's start, quiet, the dev schedule."""
    base = ForwardOptions(
        url=url,
        name="test",
        start=Start.START,
        schedule=NAMED_SCHEDULES["dev"],
        secrets=(FORWARD_SECRET,),
        output=Output.JSON,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


class Running:
    """A forwarder task, its counts and what it printed."""

    def __init__(self, task: asyncio.Task[None], counts: Counts, out: io.StringIO) -> None:
        self.task = task
        self.counts = counts
        self.out = out

    def check(self) -> None:
        """Raise what ended the forwarder, if it ended: a test waiting for deliveries
        learns at once why none come."""
        if self.task.done():
            self.task.result()
            raise AssertionError("the forwarder stopped")

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@contextlib.asynccontextmanager
async def forwarding(
    settings: settings_mod.Settings,
    opts: ForwardOptions,
    rand: Callable[[], float] = random.random,
) -> AsyncIterator[Running]:
    """The forwarding loop of `opts` as a task, stopped when the block ends; `rand`
    draws its jitter."""
    out = io.StringIO()
    counts = Counts()
    view = View(opts.output, out, io.StringIO(), terminal=False)
    task = asyncio.create_task(run_forward(settings, opts, view, counts, rand=rand))
    running = Running(task, counts, out)
    try:
        yield running
    finally:
        await running.stop()


def stripe_body(
    event_id: str, payment_intent: str, event_type: str = "payment_intent.succeeded"
) -> bytes:
    """A Stripe event about `payment_intent` (its ordering key)."""
    return orjson.dumps(
        {
            "id": event_id,
            "type": event_type,
            "livemode": False,
            "data": {"object": {"id": f"ch_{event_id}", "payment_intent": payment_intent}},
        }
    )


async def post_stripe(
    client: httpx.AsyncClient, event_id: str, payment_intent: str = "pi_1", **extra: str
) -> None:
    """Send one signed Stripe event to the gateway; fail unless it is accepted."""
    body = stripe_body(event_id, payment_intent, **extra)
    ts = int(time.time())
    signature = f"t={ts},v1={vectors.stripe_v1(SECRETS['stripe'], ts, body)}"
    answer = await client.post(
        "/webhooks/stripe", content=body, headers={"stripe-signature": signature}
    )
    assert answer.status_code == 200, answer.text
