"""NATS message headers built from a stored event (`gateway.adapters.jetstream.broker`)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from gateway.adapters.jetstream.broker import message_headers
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.model import webhook_event
from gateway.core.signatures.base import FieldRef

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
