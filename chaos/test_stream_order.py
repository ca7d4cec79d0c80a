"""The order verdicts on what a stream holds, on made-up streams: they pass the order
they must, and catch a swap, a loss, a stranger and a key stored behind its successor."""

from __future__ import annotations

import pytest

from chaos.stream_order import Stored, key_order, publisher_order

POSTED = ["e0", "e1", "e2", "e3"]


def stream(*ids: str) -> list[Stored]:
    return [Stored(i + 1, "events.b.t", "service:b", e, None, None) for i, e in enumerate(ids)]


@pytest.mark.parametrize(
    ("ids", "ok", "figures"),
    [
        (POSTED, True, {"repeats": 0, "out_of_order": 0}),
        (["e0", "e1", "e0", "e2", "e3", "e3"], True, {"repeats": 2}),  # first copies in order
        (["e0", "e2", "e1", "e3"], False, {"out_of_order": 2, "first_out_of_order": 1}),
        (["e1", "e0", "e1", "e2", "e3"], False, {"out_of_order": 2, "repeats": 1}),
        (["e0", "e1", "e3"], False, {"missing": 1, "out_of_order": 0}),
        ([*POSTED, "x9"], False, {"unexpected": 1}),
    ],
    ids=["in-order", "repeats-behind", "swapped", "repeat-ahead", "lost", "stranger"],
)
def test_publisher_order(ids, ok, figures):
    result = publisher_order("t", POSTED, stream(*ids))
    assert result.ok is ok, result.table()
    assert {k: result.figures[k] for k in figures} == figures
    assert bool(result.problems) is not ok


def test_key_order_counts_messages_behind_a_later_seq_of_their_key():
    def m(seq: int, event: str, key: str | None, key_seq: int | None) -> Stored:
        return Stored(seq, "webhooks.stripe.x", "stripe", event, key, key_seq)

    held = [
        m(1, "a1", "A", 1),
        m(2, "a3", "A", 3),
        m(3, "b1", "B", 1),
        m(4, "a2", "A", 2),  # behind A's 3
        m(5, "a3", "A", 3),  # a repeat: not counted again
        m(6, "u", None, None),  # unordered
        m(7, "b2", "B", 2),
    ]
    assert key_order(held) == {
        "keyed_messages": 5,
        "stored_behind_later_seq": 1,
        "keys_reordered": 1,
    }
