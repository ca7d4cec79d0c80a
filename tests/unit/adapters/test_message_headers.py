"""NATS message headers built from a stored event (`gateway.adapters.jetstream.broker`)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from gateway.adapters.jetstream.broker import message_headers
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.events.model import webhook_event
from gateway.core.signatures.base import FieldRef
from gateway.core.trace_context import TraceParent, parse_traceparent
from gateway.settings.sections import HEADER_BUDGET_BYTES

AT = datetime(2026, 1, 1, tzinfo=UTC)
JSON_ID, JSON_TYPE = FieldRef("json", "id"), FieldRef("json", "type")


@pytest.mark.parametrize(
    ("event_type", "header"),
    [("a.b", "a.b"), ("a\r\nX-Evil: 1", "a\ufffd\ufffdX-Evil: 1"), ("a\x00", "a\ufffd")],
)
def test_nats_headers_never_carry_control_characters(event_type: str, header: str) -> None:
    """A row recorded before types were checked can still be relayed: its type header is
    made printable, so no header can be injected."""
    event = webhook_event("p", JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "t"}', AT)
    stored = StoredEvent(1, dataclasses.replace(event, event_type=event_type))
    assert message_headers(stored)["Gateway-Event-Type"] == header


def test_a_traced_event_carries_its_traceparent_and_an_untraced_one_none() -> None:
    """Tracing on: the publish span's `traceparent` travels in the message, so the worker
    joins the trace; tracing off: the message is as it always was. A provider's own
    `traceparent` request header is never forwarded (it is not the event's)."""
    body = b'{"id": "e", "type": "t"}'
    event = webhook_event("p", JSON_ID, JSON_TYPE, {"traceparent": "00-provider"}, body, AT)
    assert "traceparent" not in message_headers(StoredEvent(1, event))
    value = str(TraceParent(0xABC, 0xDEF, 1))
    traced = dataclasses.replace(event, traceparent=value)
    headers = message_headers(StoredEvent(1, traced))
    assert parse_traceparent(headers["traceparent"]) == TraceParent(0xABC, 0xDEF, 1)


def test_the_longest_headers_fit_the_budget_with_a_traceparent() -> None:
    """The header budget still covers the longest ids and types the gateway accepts."""
    body = b'{"id": "e", "type": "t"}'
    event = webhook_event("p" * 64, JSON_ID, JSON_TYPE, {}, body, AT)
    longest = dataclasses.replace(
        event, event_id="e" * 255, event_type="t" * 200, traceparent=str(TraceParent(1, 1, 1))
    )
    headers = message_headers(StoredEvent(1, longest))
    size = sum(len(k) + len(v) + 4 for k, v in headers.items()) + len("NATS/1.0\r\n\r\n")
    assert size < HEADER_BUDGET_BYTES / 2
