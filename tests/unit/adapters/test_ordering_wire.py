"""What ordering puts on the wire: the two message headers of a keyed, numbered event,
and the advisory lock id a key is numbered (and removed by retention) under."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from gateway.adapters.jetstream.broker import KEY_SEQ_HEADER, ORDER_KEY_HEADER, message_headers
from gateway.adapters.postgres.ordering.key_numbers import KeyedRow, key_lock_id, repeats_before_new
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.events.model import Event, new_event
from gateway.core.ordering.keys import MAX_KEY_BYTES
from gateway.core.trace_context import TraceParent
from gateway.settings.sections import HEADER_BUDGET_BYTES

AT = datetime(2026, 1, 1, tzinfo=UTC)
EVENT = new_event("stripe", "evt_1", "charge.refunded", "webhooks.stripe.charge.refunded",
                  {}, b"{}", AT)  # fmt: skip


def headers_of(event: Event) -> dict[str, str]:
    return message_headers(StoredEvent(1, event))


@pytest.mark.parametrize(("order_key", "key_seq", "expected"), [
    ("pi_1", 7, {"Gateway-Order-Key": "pi_1", "Gateway-Key-Seq": "7"}),
    ("pi_1", None, {}),  # keyed, not numbered (ordering was off, or not recorded yet)
    (None, None, {}),  # unordered
])  # fmt: skip
def test_a_keyed_numbered_event_carries_both_ordering_headers_and_others_neither(
    order_key: str | None, key_seq: int | None, expected: dict[str, str]
) -> None:
    event = dataclasses.replace(EVENT, order_key=order_key, key_seq=key_seq)
    headers = headers_of(event)
    found = {k: v for k, v in headers.items() if k in (ORDER_KEY_HEADER, KEY_SEQ_HEADER)}
    assert found == expected
    assert headers["Nats-Msg-Id"] == "stripe:evt_1"  # the rest as before


def test_the_longest_ordered_headers_stay_well_inside_the_budget() -> None:
    longest = dataclasses.replace(
        EVENT, event_id="e" * 255, event_type="t" * 200, source="backfill",
        traceparent=str(TraceParent(1, 1, 1)), order_key="k" * MAX_KEY_BYTES, key_seq=2**63 - 1,
    )  # fmt: skip
    headers = headers_of(longest)
    size = sum(len(k) + len(v) + 4 for k, v in headers.items()) + len("NATS/1.0\r\n\r\n")
    assert size < HEADER_BUDGET_BYTES / 2


def test_a_keys_lock_id_is_fixed_across_processes_and_keeps_provider_and_key_apart() -> None:
    # A fixed value: Python's own hash() is salted per process and must never be used.
    assert key_lock_id("stripe", "pi_1") == -885586360981323660
    assert key_lock_id("stripe", "pi_1") != key_lock_id("paddle", "pi_1")
    assert key_lock_id("a", "b c") != key_lock_id("a b", "c")
    assert all(-(2**63) <= key_lock_id("p", f"k{i}") < 2**63 for i in range(1000))


@pytest.mark.parametrize(("keyed", "inserted", "again"), [
    ([("p", "a", "k", 1), ("p", "b", "k", 2)], {"a", "b"}, set()),  # all new
    ([("p", "a", "k", 1), ("p", "b", "k", 2)], {"a"}, set()),  # a repeat after: no gap
    ([("p", "a", "k", 1), ("p", "b", "k", 2)], set(), set()),  # all repeats: no number used
    ([("p", "a", "k", 1), ("p", "b", "k", 2)], {"b"}, {"a"}),  # b would be 2 after no 1
    ([("p", "a", "k", 1), ("p", "b", "j", 1), ("p", "c", "k", 2)], {"a", "b"}, set()),
    ([("p", "a", "k", 1), ("p", "b", "j", 1), ("p", "c", "j", 2)], {"a", "c"}, {"b"}),
    ([("p", "a", "k", 1), ("q", "b", "k", 1), ("p", "c", "k", 2)], {"b", "c"}, {"a"}),
    ([("p", "a", "k", 1), ("p", "b", "k", 2), ("p", "c", "k", 3)], {"c"}, {"a", "b"}),
])  # fmt: skip
def test_a_group_is_numbered_again_only_when_a_repeat_came_before_a_new_row_of_its_key(
    keyed: list[KeyedRow], inserted: set[str], again: set[str]
) -> None:
    ids = {(p, e) for p, e, _, _ in keyed if e in inserted}
    assert repeats_before_new(keyed, ids) == {(p, e) for p, e, _, _ in keyed if e in again}
