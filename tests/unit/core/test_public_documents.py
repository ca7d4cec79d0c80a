"""The public JSON of a dead letter, an event and an ordering key: what each document
carries for a role that reads payloads and one that does not, and how it writes times.
The CLI and the API print these same documents (tests/integration/console/
test_one_shape.py holds them equal on a database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

from gateway.core.dlq.columns import Amount
from gateway.core.dlq.model import DlqRow, RowBrief
from gateway.core.dlq.public import brief_doc, row_doc
from gateway.core.events import public as events_public
from gateway.core.events.rows import EventBrief, EventRow
from gateway.core.instants import instant
from gateway.core.ordering.admin import KeyListing
from gateway.core.ordering.public import key_doc

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MESSAGE = "merchant acct_9 has no EUR account"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def brief(stage: str = "settlement") -> RowBrief:
    return RowBrief(
        id=412,
        stage=stage,
        provider="stripe",
        event_id="evt_1",
        subject="webhooks.stripe.charge.refunded",
        error_class="UNKNOWN_MERCHANT",
        attempts=2,
        received_at=T0,
        first_failed_at=T0,
        last_failed_at=T0 + timedelta(minutes=5),
        is_resolved=False,
        resolution=None,
        source="live",
        error_message=MESSAGE,
    )


def row() -> DlqRow:
    return DlqRow(
        id=412,
        webhook_id=9812,
        stage="settlement",
        provider="stripe",
        event_id="evt_1",
        subject=None,
        error_class="UNKNOWN_MERCHANT",
        error_message=MESSAGE,
        error_detail="Traceback ...",
        payload=b'{"id": "evt_1"}',
        headers={"User-Agent": "Stripe/1.0", "content-type": "application/json"},
        attempts=2,
        received_at=T0,
        first_failed_at=T0,
        last_failed_at=T0,
        is_resolved=False,
        resolved_at=None,
        resolution=None,
        resolution_note=None,
        resolved_by=None,
        auto_replays=1,
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        (T0, "2026-12-01T09:00:00Z"),
        (T0.replace(microsecond=120431), "2026-12-01T09:00:00.120431Z"),
        # An offset is written as the same instant in UTC.
        (datetime(2026, 12, 1, 10, 0, tzinfo=timezone(timedelta(hours=1))), "2026-12-01T09:00:00Z"),
    ],
)
def test_an_instant_is_utc_with_a_z(value: datetime | None, text: str | None) -> None:
    """As orjson's OPT_UTC_Z writes it, so the CLI's serializer adds nothing of its own."""
    assert instant(value) == text
    if value is not None and value.tzinfo is UTC:
        assert orjson.dumps(value, option=orjson.OPT_UTC_Z).decode() == f'"{text}"'


@pytest.mark.parametrize(
    ("stage", "reads", "message", "amount"),
    [
        ("settlement", True, MESSAGE, {"amount_minor": 1200, "currency": "EUR"}),
        ("settlement", False, None, None),  # may quote the body: withheld, no amount
        ("publish", False, MESSAGE, None),  # the relay's own words: every role reads them
    ],
)
def test_a_list_item_carries_payload_only_for_a_reader(
    stage: str, reads: bool, message: str | None, amount: object
) -> None:
    """The message and the amount are payload-derived; the length always shows."""
    doc = brief_doc(
        brief(stage), T0 + timedelta(seconds=90), reads_payloads=reads, amount=Amount(1200, "EUR")
    )
    assert (doc["error_message"], doc["amount"]) == (message, amount)
    assert doc["error_message_chars"] == len(MESSAGE)
    assert doc["error_message_withheld"] is (message is None)
    assert doc["age_s"] == 90.0
    assert doc["last_failed_at"] == "2026-12-01T09:05:00Z"


def test_a_row_carries_its_stack_only_for_a_reader() -> None:
    """The stack may quote the event: absent (not null) below the payload capability;
    header names are listed, any case, in one order, their values never."""
    read = row_doc(row(), reads_payloads=True)
    unread = row_doc(row(), reads_payloads=False)
    assert read["error_detail"] == "Traceback ..." and "error_detail" not in unread
    assert unread["error_message"] is None and unread["error_message_withheld"] is True
    assert read["header_names"] == ["content-type", "User-Agent"]
    assert (read["auto_replays"], read["payload_size_bytes"]) == (1, 15)
    assert "payload" not in read and "headers" not in read


def test_an_event_document_lists_its_own_fields_never_its_body() -> None:
    event = EventRow(
        EventBrief(9812, "stripe", "evt_1", "charge.refunded", None, "live", T0, "published", None),
        {"traceparent": TRACEPARENT, "Stripe-Signature": "t=1,v1=ab"},
        b"{}",
        publish_attempts=0,
        order_key="pi_3",
        key_seq=4,
    )
    doc = events_public.row_doc(event)
    assert doc == events_public.brief_doc(event.brief) | {
        "publish_attempts": 0,
        "order_key": "pi_3",
        "key_seq": 4,
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "header_names": ["Stripe-Signature", "traceparent"],
    }
    assert doc["received_at"] == "2026-12-01T09:00:00Z"


@pytest.mark.parametrize(
    ("held", "last_seq", "blocked"),
    [
        (True, 5, 2),  # numbers 4 and 5 wait behind the held 3
        (True, 3, 0),
        (True, None, None),  # the counter is gone: nothing to count
        (False, 5, None),  # not held: nothing is blocked
    ],
)
def test_a_key_counts_what_waits_behind_its_hold(
    held: bool, last_seq: int | None, blocked: int | None
) -> None:
    key = KeyListing(
        provider="stripe",
        order_key="pi_3",
        applied_seq=2,
        last_seq=last_seq,
        touched_at=T0,
        progressed_at=None,
        held_seq=3 if held else None,
        held_dlq_id=412 if held else None,
        hold_reason="UNKNOWN_MERCHANT" if held else None,
        held_at=T0 if held else None,
    )
    doc = key_doc(key, T0 + timedelta(minutes=20))
    assert doc["blocked"] == blocked
    assert doc["held_for_s"] == (1200.0 if held else None)
    assert doc["last_numbered_at"] == "2026-12-01T09:00:00Z"
    assert doc["progressed_at"] is None
