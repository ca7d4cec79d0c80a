"""W3C `traceparent` values: what is read, what is refused, and the round trip."""

from __future__ import annotations

import pytest

from gateway.core.trace_context import TraceParent, format_traceparent, parse_traceparent

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_value_is_read() -> None:
    """The spec's own example."""
    assert parse_traceparent(VALID) == TraceParent(
        0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1
    )


def test_the_round_trip_is_exact() -> None:
    """What the publisher writes into a message is what the worker reads back."""
    parent = TraceParent(1, 2, 0)
    assert str(parent) == "00-00000000000000000000000000000001-0000000000000002-00"
    assert parse_traceparent(str(parent)) == parent
    assert parse_traceparent(VALID) is not None
    assert str(parse_traceparent(VALID)) == VALID
    assert format_traceparent(2**128 - 1, 2**64 - 1, 0x101) == (
        "00-" + "f" * 32 + "-" + "f" * 16 + "-01"
    )


def test_sampled_is_the_low_flag_bit() -> None:
    assert TraceParent(1, 1, 1).sampled and not TraceParent(1, 1, 0).sampled


def test_a_later_version_keeps_its_first_four_fields() -> None:
    """The spec says to read a newer version's known fields and ignore the rest."""
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
    assert parse_traceparent(later) == parse_traceparent(VALID)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "garbage",
        VALID.upper(),  # upper-case hex is invalid
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # forbidden version
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",  # short flags
        VALID + "-extra",  # version 00 has exactly four fields
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",  # not hex
        VALID + "-" + "a" * 300,  # far too long to be read at all
    ],
)
def test_malformed_values_are_refused(value: str | None) -> None:
    """A malformed header names no parent: the worker or the request starts a new trace."""
    assert parse_traceparent(value) is None
