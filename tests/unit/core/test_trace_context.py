"""W3C `traceparent` values: what is read, what is refused, and the round trip; and the
sampling decisions made before the SDK is called."""

from __future__ import annotations

import pytest

from gateway.core.trace_context import (
    TraceParent,
    format_traceparent,
    keeps,
    new_trace,
    parse_traceparent,
    request_parent,
)

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


LOW = 2**64  # the sampling rule reads a trace id's low 64 bits
HIGH = 0xABCD << 64  # high bits that must not matter


@pytest.mark.parametrize(
    ("ratio", "trace_id", "kept"),
    [
        (0.0, 0, False),  # ratio 0 keeps nothing, not even the smallest id
        (0.0, HIGH, False),
        (1.0, LOW - 1, True),  # ratio 1 keeps everything, even the largest
        (1.0, HIGH | (LOW - 1), True),
        (0.5, LOW // 2 - 1, True),  # just under the bound
        (0.5, LOW // 2, False),  # at the bound: kept means strictly under it
        (0.5, HIGH | (LOW // 2 - 1), True),  # the high bits are ignored
        (0.1, round(0.1 * LOW) - 1, True),
        (0.1, round(0.1 * LOW), False),
        (0.1, LOW - 1, False),
    ],
)
def test_a_new_trace_is_kept_when_its_low_64_bits_fall_under_the_ratio(
    ratio: float, trace_id: int, kept: bool
) -> None:
    """The SDK's `TraceIdRatioBased` rule, so one trace id gets one decision anywhere."""
    assert keeps(ratio, trace_id) is kept


@pytest.mark.parametrize(
    ("ratio", "trace_id", "flags"),
    [(1.0, 7, 0x01), (0.0, 7, 0x00), (0.5, LOW - 1, 0x00), (0.5, 1, 0x01)],
)
def test_a_new_trace_carries_its_decision_in_its_flags(
    ratio: float, trace_id: int, flags: int
) -> None:
    """Drawn from the two random ids given; its `traceparent` tells the processes
    downstream whether to record the event (flags 01) or skip it (00)."""
    drawn = new_trace(ratio, trace_id, 9)
    assert drawn == TraceParent(trace_id, 9, flags)
    assert str(drawn).endswith(f"-{flags:02x}")


SENDERS_SAMPLED = TraceParent(5, 6, 0x01)
SENDERS_UNSAMPLED = TraceParent(5, 6, 0x00)


@pytest.mark.parametrize(
    ("incoming", "trust_incoming", "verified", "accepted", "joined"),
    [
        (None, False, False, True, None),  # no header: a new trace
        (None, True, True, True, None),
        (SENDERS_SAMPLED, False, True, True, None),  # untrusted: a link at most, never the parent
        (SENDERS_SAMPLED, True, False, True, None),  # trusted but unverified: anyone could send it
        (SENDERS_SAMPLED, True, True, True, SENDERS_SAMPLED),  # trusted, verified, new: joined
        (SENDERS_UNSAMPLED, True, True, True, SENDERS_UNSAMPLED),  # joined, and not sampled
        (SENDERS_UNSAMPLED, True, False, True, None),
        # A replay of a captured delivery verifies again and is answered `duplicate`:
        # whoever holds one must not choose to be recorded by sending it again.
        (SENDERS_SAMPLED, True, True, False, None),
        (SENDERS_UNSAMPLED, True, True, False, None),  # our own draw decides, either way
        (SENDERS_SAMPLED, False, True, False, None),
    ],
)
def test_a_senders_traceparent_is_joined_only_when_trusted_verified_and_new(
    incoming: TraceParent | None,
    trust_incoming: bool,
    verified: bool,
    accepted: bool,
    joined: TraceParent | None,
) -> None:
    """An unauthenticated `-01`, or a replayed one, must not choose to be recorded."""
    assert request_parent(incoming, trust_incoming, verified, accepted) == joined
