"""A one-pass command's JetStream publisher (`gateway reconcile`): one connection of its
own, no reconnecting, each PubAck awaited, failing fast."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from gateway.adapters.jetstream.publish import NATS_ERRORS, message_bytes
from gateway.errors import BrokerUnavailable
from gateway.settings import NatsSettings


class OneShotPublisher:
    """Publishes to the stream over a connection of its own, awaiting each PubAck.

    Nothing connects until `connect`: a pass with nothing to publish never needs NATS.
    There is no reconnect loop either: a pass that cannot publish fails fast, and the
    next pass finds the same events again.
    """

    def __init__(self, settings: NatsSettings, name: str) -> None:
        self._settings = settings
        self._name = name
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None

    async def connect(self) -> None:
        """Connect (once); `BrokerUnavailable` if no server answers."""
        if self._nc is not None:
            return
        timeout_s = self._settings.request_timeout_s
        try:
            nc = await nats.connect(
                self._settings.servers,
                name=self._name,
                connect_timeout=max(1, int(timeout_s)),
                # nats-py retries the first connect until every server has failed more than
                # max_reconnect_attempts times (0 would mean for ever): two tries, then give up.
                max_reconnect_attempts=1,
                reconnect_time_wait=0.5,
                allow_reconnect=False,
            )
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"NATS is not reachable: {type(exc).__name__}") from exc
        self._nc, self._js = nc, nc.jetstream(timeout=timeout_s)

    def fits(self, body: bytes, headers: dict[str, str]) -> bool:
        """Whether the connected server's `max_payload` takes this message, its headers
        counted as the relay counts them (`publish.message_bytes`): the server answers a
        larger one by closing the connection."""
        if self._nc is None:
            raise BrokerUnavailable("not connected to NATS")
        return message_bytes(body, headers) <= self._nc.max_payload

    async def publish(self, subject: str, body: bytes, headers: dict[str, str]) -> bool:
        """Publish and await the PubAck: True if the stream stored the message, False if
        it dropped it as a duplicate of its `Nats-Msg-Id`; `BrokerUnavailable` when no
        PubAck came (an error reply, a timeout, a lost connection)."""
        if self._js is None:
            raise BrokerUnavailable("not connected to NATS")
        try:
            ack = await self._js.publish(
                subject,
                body,
                timeout=self._settings.request_timeout_s,
                stream=self._settings.stream,
                headers=headers,
            )
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"publish not acknowledged: {type(exc).__name__}") from exc
        return not ack.duplicate

    async def close(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            with contextlib.suppress(*NATS_ERRORS):
                await nc.close()


@contextlib.asynccontextmanager
async def open_one_shot_publisher(
    settings: NatsSettings, name: str
) -> AsyncIterator[OneShotPublisher]:
    """A `OneShotPublisher` for the block's lifetime, closed (if it connected) at the end."""
    publisher = OneShotPublisher(settings, name)
    try:
        yield publisher
    finally:
        await publisher.close()
