"""Stream messages the forwarder cannot read as events: which headers make a message an
event, the reason given for one that is not, and the dead letter that keeps it (its own
stable id, what it held, nothing PostgreSQL refuses, no credentials); and a replay of such
a row sends nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from gateway.core.dlq.model import DlqRow
from gateway.dlq.forward_handler import forward_handlers
from gateway.errors import ErrorClass, ForwardAttemptsExhausted, StreamMessageUnreadable
from gateway.forward.unreadable import (
    UNREADABLE_ID_PREFIX,
    unreadable_event,
    unreadable_id,
    unreadable_reason,
)
from tests.support.forwarding import options

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)

#: What the relay writes on an event's message.
GOOD = {
    "Nats-Msg-Id": "stripe:evt_1",
    "Gateway-Provider": "stripe",
    "Gateway-Event-Id": "evt_1",
    "Gateway-Event-Type": "payment_intent.succeeded",
    "Gateway-Received-At": "2026-12-04T11:59:00+00:00",
}


def without(name: str) -> dict[str, str]:
    return {k: v for k, v in GOOD.items() if k != name}


def changed(name: str, value: str) -> dict[str, str]:
    return {**GOOD, name: value}


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        # What the relay writes is an event; so is an internal publisher's, and an id
        # with U+FFFD (the relay's `printable` writes one for a non-printable character).
        (GOOD, None),
        (changed("Gateway-Provider", "service:billing"), None),
        (changed("Gateway-Event-Id", "evt_\ufffd"), None),
        (changed("Gateway-Received-At", "2026-12-04T11:59:00"), None),  # no zone: still read
        (without("Gateway-Event-Type"), None),  # an event without a type is sent as such
        # Each header every event carries, absent or blank.
        (without("Nats-Msg-Id"), "no Nats-Msg-Id header"),
        (without("Gateway-Provider"), "no Gateway-Provider header"),
        (without("Gateway-Event-Id"), "no Gateway-Event-Id header"),
        (changed("Gateway-Event-Id", "  "), "no Gateway-Event-Id header"),
        (without("Gateway-Received-At"), "no Gateway-Received-At header"),
        ({}, "no Nats-Msg-Id header"),  # the first missing one is named
        # Present but unreadable: a value that was not UTF-8 reads as U+FFFD.
        (
            changed("Gateway-Provider", "str\ufffdpe"),
            "Gateway-Provider is not a provider or service name",
        ),
        (
            changed("Gateway-Provider", "webhooks.stripe"),
            "Gateway-Provider is not a provider or service name",
        ),
        (
            changed("Gateway-Event-Id", "evt\x01"),
            "Gateway-Event-Id holds a character a header cannot carry",
        ),
        (
            changed("Gateway-Received-At", "yesterday"),
            "Gateway-Received-At is not an ISO 8601 time",
        ),
    ],
)
def test_which_messages_are_events(headers: dict[str, str], reason: str | None) -> None:
    """A message is an event when it has every header the relay writes, each readable;
    the reason names the header, never its value."""
    assert unreadable_reason(headers) == reason


def test_the_id_is_the_messages_own_and_stable() -> None:
    """A redelivery of a message finds its own row; no other message shares it, not even
    one with the same sequence in a recreated stream, nor the same bytes elsewhere."""
    headers = without("Gateway-Event-Id")
    first = unreadable_id("webhooks.stripe.x", headers, b"{}", 7)
    assert first.startswith(UNREADABLE_ID_PREFIX + "7:")
    assert unreadable_id("webhooks.stripe.x", dict(reversed(headers.items())), b"{}", 7) == first
    others = {
        unreadable_id("webhooks.stripe.x", headers, b"{} ", 7),
        unreadable_id("webhooks.stripe.y", headers, b"{}", 7),
        unreadable_id("webhooks.stripe.x", {**headers, "X": "1"}, b"{}", 7),
        unreadable_id("webhooks.stripe.x", headers, b"{}", 8),
    }
    assert first not in others and len(others) == 4
    assert unreadable_id("s", {}, b"", None).startswith(UNREADABLE_ID_PREFIX + "?:")


def test_the_dead_letter_keeps_what_the_message_held() -> None:
    """Subject, headers and body as they were; the headers' provider and time."""
    headers = {**without("Gateway-Event-Id"), "X-Extra": "kept"}
    body = b"\x00\xffnot json"
    event = unreadable_event("webhooks.stripe.payment_intent.succeeded", headers, body, 3, NOW)
    assert event.provider == "stripe"
    assert event.event_id == unreadable_id(
        "webhooks.stripe.payment_intent.succeeded", headers, body, 3
    )
    assert event.event_type == "payment_intent.succeeded"
    assert event.subject == "webhooks.stripe.payment_intent.succeeded"
    assert dict(event.headers) == headers
    assert event.body == body
    assert event.received_at == datetime(2026, 12, 4, 11, 59, tzinfo=UTC)
    # It holds no key: it must not hold back the key's events.
    assert event.order_key is None and event.key_seq is None


@pytest.mark.parametrize(
    "headers",
    [
        {"Gateway-Provider": "str\ufffdpe", "Gateway-Received-At": "yesterday"},
        {"Gateway-Received-At": "2026-12-04T11:59:00"},  # a time without a zone
        {},
    ],
)
def test_what_cannot_be_read_is_not_made_up(headers: dict[str, str]) -> None:
    """No provider unless the header names one; the time it was read, unless the header
    holds one with its zone."""
    event = unreadable_event("s", headers, b"", 1, NOW)
    assert event.provider == ""
    assert event.received_at == NOW
    assert event.event_type is None


def test_the_dead_letter_holds_nothing_postgresql_refuses_and_no_credential() -> None:
    """A NUL is replaced wherever it is (text and jsonb refuse it); a credential header
    is left out, as wherever the gateway stores headers."""
    headers = {
        "Gateway-Event-Type": "a\x00b",
        "X-Nul\x00": "v\x00",
        "Authorization": "Bearer secret",
        "stripe-signature": "t=1,v1=ab",
    }
    event = unreadable_event("sub\x00ject", headers, b"\x00", 1, NOW)
    assert event.event_type == "a\ufffdb"
    assert event.subject == "sub\ufffdject"
    assert dict(event.headers) == {"Gateway-Event-Type": "a\ufffdb", "X-Nul\ufffd": "v\ufffd"}
    assert event.body == b"\x00"  # bytea holds any byte


@dataclass
class _Context:
    """A replay's context: the guard needs none of it."""

    pool: object = None


def _row(error_class: str) -> DlqRow:
    return DlqRow(
        id=1,
        webhook_id=None,
        stage="forward:odd",
        provider="stripe",
        event_id="unreadable:3:abc",
        subject="webhooks.stripe.x",
        error_class=error_class,
        error_message="stream message 3 cannot be read: no Gateway-Event-Id header",
        error_detail=None,
        payload=b"{}",
        headers={},
        attempts=1,
        received_at=NOW,
        first_failed_at=NOW,
        last_failed_at=NOW,
        is_resolved=False,
        resolved_at=None,
        resolution=None,
        resolution_note=None,
        resolved_by=None,
    )


async def test_a_replay_of_an_unreadable_message_sends_nothing() -> None:
    """Its id is made up, so sending it would invent an event: the replay fails with the
    row's own code (the row keeps it) before any request. The same handler does send an
    ordinary row (here to a closed port, so it fails as an attempt)."""
    factory = forward_handlers({"odd": options("http://127.0.0.1:9/hook", name="odd")})
    handler = await factory["forward:odd"](_Context())  # type: ignore[arg-type]
    with pytest.raises(StreamMessageUnreadable) as raised:
        await handler(_row(ErrorClass.STREAM_MESSAGE_UNREADABLE))
    assert raised.value.error_class is ErrorClass.STREAM_MESSAGE_UNREADABLE
    with pytest.raises(ForwardAttemptsExhausted):
        await handler(_row(ErrorClass.FORWARD_ATTEMPTS_EXHAUSTED))
