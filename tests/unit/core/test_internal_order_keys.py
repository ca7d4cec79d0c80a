"""An internal event's ordering key (`core.events.model.service_event`): the `Ordering-Key`
header, else the payment it names, else its subject, so one bad payment of a service
holds only that payment's later events. Table-driven."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from gateway.core.events.model import ordered_subjects, service_event

AT = datetime(2026, 12, 6, tzinfo=UTC)
ORDERED = ordered_subjects(("events.>",))


@pytest.mark.parametrize(
    ("headers", "data", "key"),
    [
        ({"ordering-key": "order-9"}, {"settlement_id": "pay_1"}, "order-9"),
        ({}, {"settlement_id": "pay_1"}, "pay_1"),
        ({}, {"payout_id": "po_1", "merchant_id": "m"}, "po_1"),
        ({}, {"settlement_id": "  "}, "events.billing.payment.captured"),
        ({}, {"settlement_id": 7}, "events.billing.payment.captured"),
        ({}, {}, "events.billing.payment.captured"),
        ({"ordering-key": ""}, {"settlement_id": "pay_2"}, "pay_2"),
    ],
    ids=["the header wins", "the payment", "a payout", "a blank payment", "not text",
         "no payment: the subject", "an empty header names none"],
)  # fmt: skip
def test_an_internal_event_is_keyed_by_its_payment_without_a_header(
    headers: dict[str, str], data: dict[str, object], key: str
) -> None:
    body = orjson.dumps({"type": "payment.captured", "data": data})
    event = service_event(
        "billing", ("events.billing.>",), "k1", headers, body, AT, ordered=ORDERED
    )
    assert event.order_key == key


def test_an_unordered_subject_has_no_key() -> None:
    body = orjson.dumps({"type": "payment.captured", "data": {"settlement_id": "pay_1"}})
    event = service_event("billing", ("events.billing.>",), "k1", {}, body, AT)
    assert event.order_key is None
