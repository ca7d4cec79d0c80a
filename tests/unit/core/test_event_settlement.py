"""The console reads an event's settlement by the transfer id the worker would use: the
worker and the console ask the same registry (`core.mappings`), table-driven."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from gateway.core.console.event_settlement import settlement_asked
from gateway.core.events.model import Event
from gateway.core.providers.movements import instruction_of
from gateway.core.settlement.instructions import SettlementKind, transfer_id
from gateway.settlement.settler import instruction_for

SCHEMES = {"stripe": "stripe", "github": "github"}
CAPTURE = {
    "id": "evt_1",
    "type": "payment_intent.succeeded",
    "data": {
        "object": {
            "id": "pi_1",
            "amount_received": 1250,
            "currency": "eur",
            "metadata": {"merchant_id": "m_1"},
        }
    },
}
INTERNAL = {
    "id": "e1",
    "data": {"settlement_id": "s1", "merchant_id": "m", "amount_minor": 5, "currency": "USD"},
}
CASES = [
    ("stripe", "payment_intent.succeeded", orjson.dumps(CAPTURE), SettlementKind.CAPTURE),
    ("stripe", "invoice.paid", b"{}", None),
    ("github", "push", b"not even json", None),  # a source that never settles is not read
    ("service:billing", "payment.captured", orjson.dumps(INTERNAL), SettlementKind.CAPTURE),
    ("service:billing", "user.created", b"{}", None),
    ("stripe", None, b"{}", None),
]


@pytest.mark.parametrize(("provider", "event_type", "body", "kind"), CASES)
def test_the_worker_asks_the_registry_the_console_asks(
    provider: str, event_type: str | None, body: bytes, kind: SettlementKind | None
) -> None:
    event = Event(provider, "e", event_type, None, {}, body, datetime.now(UTC))
    got = instruction_for(event, SCHEMES)
    assert (got.kind if got else None) is kind
    assert instruction_of(provider, event_type, body, SCHEMES) == got


def test_a_capture_names_its_transfer() -> None:
    asked = settlement_asked("stripe", "payment_intent.succeeded", orjson.dumps(CAPTURE), SCHEMES)
    assert asked.instruction is not None
    assert asked.transfer_id == transfer_id(asked.instruction)
    assert asked.reason == ""


@pytest.mark.parametrize(
    ("event_type", "body", "reason"),
    [
        ("invoice.paid", b"{}", "stripe events of type invoice.paid do not settle"),
        ("payment_intent.succeeded", b"\xff not json", "its body cannot be settled"),
        ("payment_intent.succeeded", b'{"data": {}}', "its body cannot be settled"),
    ],
)
def test_why_there_is_no_transfer(event_type: str, body: bytes, reason: str) -> None:
    asked = settlement_asked("stripe", event_type, body, SCHEMES)
    assert asked.transfer_id is None
    assert reason in asked.reason
