"""What the step-aside tests share (a settlement worker's, a forwarder's): a database URL
led through the fault proxy, and a consumer whose fetches and answers are written down."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from chaos.proxy import FaultProxy
from gateway.adapters.jetstream.consumer import Delivery, DurablePullConsumer


def through(url: str, proxy: FaultProxy) -> str:
    """`url` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@{proxy.listen}" if user else proxy.listen
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class Seen:
    """What one worker did on the stream, in order: ("fetch",) as each fetch starts,
    ("ack",) and ("nak", delay_s) as it answers."""

    log: list[tuple[Any, ...]] = field(default_factory=list)
    fetched: int = 0

    def answers(self) -> list[tuple[Any, ...]]:
        return [entry for entry in self.log if entry[0] != "fetch"]


class Recorded(Delivery):
    """A delivery whose answers are written down."""

    __slots__ = ("seen",)
    seen: Seen

    async def ack(self) -> None:
        self.seen.log.append(("ack",))
        await super().ack()

    async def nak(self, delay_s: float | None = None) -> None:
        self.seen.log.append(("nak", delay_s or 0.0))
        await super().nak(delay_s)


def recording(consumer: DurablePullConsumer) -> Seen:
    """Record the fetches of `consumer` and the answers to what they bring."""
    seen = Seen()
    fetch_ = consumer.fetch

    async def fetch_recorded(batch_size: int, timeout_s: float) -> list[Delivery]:
        seen.log.append(("fetch",))
        out: list[Delivery] = []
        for d in await fetch_(batch_size, timeout_s):
            r = Recorded(d._msg)
            r.seen = seen
            out.append(r)
        seen.fetched += len(out)
        return out

    consumer.fetch = fetch_recorded  # type: ignore[method-assign]
    return seen
