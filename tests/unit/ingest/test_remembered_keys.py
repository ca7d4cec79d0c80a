"""The bounded memory of recorded keys, and the inbox front that answers from it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.core.events.model import Event, Outcome, webhook_event
from gateway.core.signatures.base import FieldRef
from gateway.errors import DatabaseUnavailable
from gateway.ingest.remembered_keys import RecordedKeys, RememberingInbox, key_of
from gateway.metrics import Counter


def keys_after(capacity: int, added: list[str]) -> RecordedKeys:
    keys = RecordedKeys(capacity)
    for key in added:
        keys.add(key)
    return keys


@pytest.mark.parametrize(
    ("capacity", "added", "kept", "forgotten"),
    [
        (0, ["a", "b"], [], ["a", "b"]),  # off: nothing is remembered
        (4, ["a"], ["a"], []),
        (4, ["a", "b"], ["a", "b"], []),  # the newer generation filled and became the older
        (4, ["a", "b", "c", "d"], ["c", "d"], ["a", "b"]),  # the older was dropped whole
        (4, ["a", "b", "c"], ["a", "b", "c"], []),
        (4, ["a", "a", "a"], ["a"], []),  # a repeat is one key
        (1, ["a", "b"], ["b"], ["a"]),
    ],
)
def test_keys_kept_and_forgotten(
    capacity: int, added: list[str], kept: list[str], forgotten: list[str]
) -> None:
    keys = keys_after(capacity, added)
    assert [k for k in kept if k in keys] == kept
    assert [k for k in forgotten if k in keys] == []


@pytest.mark.parametrize("capacity", [1, 2, 3, 10, 101])
def test_never_holds_more_than_its_capacity(capacity: int) -> None:
    keys = RecordedKeys(capacity)
    for i in range(capacity * 7 + 3):
        keys.add(str(i))
        assert len(keys) <= capacity
        assert str(i) in keys  # the most recent key is always kept


def test_negative_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity"):
        RecordedKeys(-1)


def test_key_keeps_provider_and_event_id_apart() -> None:
    def event(provider: str, event_id: str) -> Event:
        body = b'{"id": "%s", "type": "t"}' % event_id.encode()
        ref_id, ref_type = FieldRef("json", "id"), FieldRef("json", "type")
        return webhook_event(provider, ref_id, ref_type, {}, body, datetime.now(UTC))

    assert key_of(event("ab", "c")) != key_of(event("a", "bc"))
    assert key_of(event("stripe", "evt_1")) == key_of(event("stripe", "evt_1"))


class ScriptedInbox:
    """Answers from a script and records what reached it (decision logic only)."""

    def __init__(self, answers: list[Outcome | Exception]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def accept(self, event: Event) -> Outcome:
        self.asked.append(event.event_id)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def close(self) -> None:
        pass


def stripe_event(event_id: str) -> Event:
    body = b'{"id": "%s", "type": "charge.succeeded"}' % event_id.encode()
    ref_id, ref_type = FieldRef("json", "id"), FieldRef("json", "type")
    return webhook_event("stripe", ref_id, ref_type, {}, body, datetime.now(UTC))


@pytest.mark.parametrize(
    ("answers", "results", "reached_gate"),
    [
        # accepted once, then every repeat from memory
        ([Outcome.ACCEPTED], [Outcome.ACCEPTED, Outcome.DUPLICATE, Outcome.DUPLICATE], 1),
        # the gate said duplicate (another process recorded it): remembered as well
        ([Outcome.DUPLICATE], [Outcome.DUPLICATE, Outcome.DUPLICATE], 1),
        # a failed commit teaches nothing: the next attempt asks the gate again
        (
            [DatabaseUnavailable("down"), Outcome.ACCEPTED],
            [DatabaseUnavailable, Outcome.ACCEPTED, Outcome.DUPLICATE],
            2,
        ),
    ],
)
async def test_only_answers_of_the_gate_are_remembered(
    answers: list[Outcome | Exception], results: list[object], reached_gate: int
) -> None:
    gate = ScriptedInbox(list(answers))
    counter = Counter("c", "")
    inbox = RememberingInbox(gate, RecordedKeys(10), counter)
    seen: list[object] = []
    for _ in results:
        try:
            seen.append(await inbox.accept(stripe_event("evt_1")))
        except DatabaseUnavailable:
            seen.append(DatabaseUnavailable)
    assert seen == results
    assert len(gate.asked) == reached_gate
    assert counter.get() == len(results) - reached_gate


async def test_memory_off_asks_the_gate_every_time() -> None:
    gate = ScriptedInbox([Outcome.ACCEPTED, Outcome.DUPLICATE])
    inbox = RememberingInbox(gate, RecordedKeys(0), Counter("c", ""))
    assert await inbox.accept(stripe_event("evt_1")) is Outcome.ACCEPTED
    assert await inbox.accept(stripe_event("evt_1")) is Outcome.DUPLICATE
    assert gate.asked == ["evt_1", "evt_1"]
