"""The in-memory inbox and probe behave as their ports promise (the ledger fake is held
to the ledger contract suite itself: tests/integration/adapters/test_ledger_contract.py).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from gateway.core.events.model import Event, Outcome
from gateway.errors import DatabaseUnavailable, Overloaded
from tests.support.fakes import MemoryInbox, StaticProbe


def make_event(provider: str, event_id: str) -> Event:
    return Event(provider, event_id, "t", f"webhooks.{provider}.t", {}, b"{}", datetime.now(UTC))


@pytest.mark.parametrize(
    ("deliveries", "outcomes"),
    [
        ([("stripe", "e1"), ("stripe", "e1")], [Outcome.ACCEPTED, Outcome.DUPLICATE]),
        ([("stripe", "e1"), ("stripe", "e2")], [Outcome.ACCEPTED, Outcome.ACCEPTED]),
        ([("stripe", "e1"), ("adyen", "e1")], [Outcome.ACCEPTED, Outcome.ACCEPTED]),
        ([("ab", "c"), ("a", "bc")], [Outcome.ACCEPTED, Outcome.ACCEPTED]),
    ],
)
async def test_inbox_is_idempotent_by_provider_and_event_id(
    deliveries: list[tuple[str, str]], outcomes: list[Outcome]
) -> None:
    """The first delivery of a (provider, event id) is accepted, a repeat is a duplicate."""
    inbox = MemoryInbox()
    assert [await inbox.accept(make_event(p, e)) for p, e in deliveries] == outcomes
    assert len(inbox.recorded) == outcomes.count(Outcome.ACCEPTED)
    assert len(inbox.offered) == len(deliveries)


async def test_inbox_failure_records_nothing_until_cleared() -> None:
    """A told failure is raised and stores nothing; cleared, the same event is accepted."""
    inbox = MemoryInbox()
    inbox.fail_with(DatabaseUnavailable("down"))
    with pytest.raises(DatabaseUnavailable):
        await inbox.accept(make_event("stripe", "e1"))
    inbox.fail_with(None)
    assert await inbox.accept(make_event("stripe", "e1")) is Outcome.ACCEPTED


async def test_inbox_stall_holds_until_released_or_cancelled() -> None:
    """A stalled accept waits (a cancelled one records nothing) until released."""
    inbox = MemoryInbox()
    inbox.stall()
    abandoned = asyncio.create_task(inbox.accept(make_event("stripe", "e1")))
    held = asyncio.create_task(inbox.accept(make_event("stripe", "e2")))
    await asyncio.sleep(0.01)
    assert not abandoned.done() and not held.done()
    abandoned.cancel()
    inbox.release()
    assert await held is Outcome.ACCEPTED
    assert list(inbox.recorded) == [("stripe", "e2")]


async def test_closed_inbox_refuses_as_overloaded() -> None:
    """After close, accept raises Overloaded as the real inbox does while shutting down."""
    inbox = MemoryInbox()
    await inbox.close()
    with pytest.raises(Overloaded):
        await inbox.accept(make_event("stripe", "e1"))


async def test_probe_answers_as_told_and_counts() -> None:
    """A probe reports its state and how often it was asked."""
    probe = StaticProbe(up=False)
    assert await probe.ping() is False
    probe.up = True
    assert await probe.ping() is True
    assert probe.pings == 2
