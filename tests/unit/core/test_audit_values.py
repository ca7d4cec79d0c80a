"""What the audit trail keeps (`core.console.audit_values`): bounded texts and details, and one
row per address, action and minute of unauthenticated refusals."""

from __future__ import annotations

from gateway.core.console.audit_values import (
    DETAIL_ITEMS_MAX,
    TEXT_MAX_CHARS,
    AnonymousSampler,
    bounded_detail,
    bounded_text,
)


def test_a_long_text_is_cut_with_its_length_said() -> None:
    assert bounded_text("x" * TEXT_MAX_CHARS) == "x" * TEXT_MAX_CHARS
    assert bounded_text("o" * 4_000_000) == "o" * TEXT_MAX_CHARS + "... (4000000 chars)"
    assert bounded_text(None) is None


def test_a_detail_is_bounded_in_every_text_entry_and_depth() -> None:
    big = "h" * 5000
    detail = {"origin": big, big: 1, "list": [big] * 60, "deep": {"a": {"b": {"c": {"d": 1}}}}}
    kept = bounded_detail(detail)
    assert kept["origin"] == "h" * TEXT_MAX_CHARS + "... (5000 chars)"
    assert "h" * TEXT_MAX_CHARS + "... (5000 chars)" in kept
    assert len(kept["list"]) == DETAIL_ITEMS_MAX + 1 and kept["list"][-1] == "10 more"
    assert kept["deep"] == {"a": {"b": "(dict)"}}
    many = bounded_detail({f"k{n}": n for n in range(80)})
    assert len(many) == DETAIL_ITEMS_MAX + 1 and many["..."] == "30 more entries"


def test_one_row_per_address_action_and_minute_saying_how_many_were_left_out() -> None:
    s = AnonymousSampler()
    assert s.admit("10.0.0.1", "csrf.refused", 60.0) == 0
    assert [s.admit("10.0.0.1", "csrf.refused", 60.0 + n / 4) for n in range(1, 200)] == [
        None
    ] * 199
    assert s.admit("10.0.0.2", "csrf.refused", 61.0) == 0  # another address
    assert s.admit("10.0.0.1", "login.failed", 61.0) == 0  # another action
    assert s.admit("10.0.0.1", "csrf.refused", 120.0) == 199  # the next minute's row


def test_a_flood_of_new_addresses_is_bounded_in_memory() -> None:
    s = AnonymousSampler(keys_max=3)
    assert [s.admit(f"a{n}", "x", 0.0) for n in range(5)] == [0, 0, 0, None, None]
    assert s.admit("a9", "x", 60.0) == 0  # the old minute forgotten: room again
