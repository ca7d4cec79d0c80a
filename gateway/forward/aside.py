"""A forwarder whose database stops answering steps aside (`adapters.postgres.liveness`).

Forwarders of one destination share its durable consumer: a message one of them holds
is one the others cannot take. A forwarder cut off from PostgreSQL cannot count a
redelivered event's earlier failures, record a failure or park a dead letter, so each
such message used to wait out the statement timeout (10 s) and go back with a delay,
while the forwarder kept fetching more. Stepping aside, it stops fetching, cancels its
database work in hand and hands every message it holds back at once (`nak` without
delay), so a healthy forwarder takes them; it probes every second and fetches again
with the first answer.

Only database work is watched (`watched`), not the target's answer: a slow target is
what the retries are for, and a probe for every slow request would be a new database
connection a second. An event delivered at its first attempt needs no database, so a
forwarder notices the silence at its next failure, redelivery or read of the held keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from gateway.adapters.jetstream.consumer import Delivery, DurablePullConsumer, nak_at_once
from gateway.adapters.postgres import Pool
from gateway.adapters.postgres.liveness import DatabaseWatch, answers
from gateway.forward.key_lines import KeyLines

T = TypeVar("T")


class StepAside:
    """One forwarder's `DatabaseWatch`, its database work and its hand-backs."""

    def __init__(
        self,
        database_url: str,
        pool: Pool,
        consumer: DurablePullConsumer,
        lines: KeyLines,
        *,
        worker: str,
    ) -> None:
        self._database_url = database_url
        self._pool = pool
        self._consumer = consumer
        self._lines = lines
        self.watch: DatabaseWatch[Delivery] = DatabaseWatch(
            self._probe, self.hand_back, worker=worker
        )

    def serving(self) -> bool:
        """Whether the forwarder may fetch and start database work."""
        return self.watch.serving.is_set()

    async def watched(self, work: Coroutine[Any, Any, T], holding: Delivery | None) -> T:
        """Run database work that holds `holding` (None: no message).

        Slow, it makes the watch probe; should the database not answer, the watch
        cancels it and hands the message back. Work that would start while the forwarder
        is aside does not start, and hands its message back itself. Either way the
        caller sees `CancelledError`, as it would have from the watch: the message is
        answered, and nothing more is to be done with it.
        """
        held = [] if holding is None else [holding]
        if not self.serving():
            work.close()
            await nak_at_once(held)
            raise asyncio.CancelledError
        task = asyncio.ensure_future(work)
        self.watch.track(task, held)
        return await task

    async def hand_back(self, held: list[Delivery]) -> None:
        """Stepping aside: `held`, the messages waiting behind their keys and what the
        last pull request brought after its fetch returned, back to the stream at once;
        the pooled connections (to the silent server) replaced before their next use."""
        waiting = [w.delivery for w in self._lines.take_all()]
        await nak_at_once(held + waiting + self._consumer.delivered())
        await self._pool.expire_connections()

    async def hand_back_stranded(self) -> None:
        """While aside: what reached the forwarder after it stepped aside (a pull
        request still open, a key's events an attempt under way left waiting)."""
        stranded = [w.delivery for w in self._lines.take_all()] + self._consumer.delivered()
        await nak_at_once(stranded)

    async def _probe(self) -> bool:
        return await answers(self._database_url, self.watch.policy.probe_timeout_s)
