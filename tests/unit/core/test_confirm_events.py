"""The events a confirmed answer becomes: one per item, under the item's own id, published
to the provider's subject, ordered by the provider's rules; an item the gateway cannot
publish is still recorded, with the failure that parks it and no subject."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from gateway.core.bodies.content import body_digest_id
from gateway.core.confirm.events import Shaping, confirmed_events
from gateway.core.events.model import Event, Source
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Confirmed
from gateway.errors import ErrorClass

AT = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
E = ErrorClass
PAID_AS = "payment.paid"
PLAIN = Shaping("mollie_nl")
ORDERED = Shaping(
    "mollie_nl",
    event_types=("payment.*", "refund.refunded"),
    order_rules=parse_rules(["refund.* /object_id", "/payment_id"]),
    ordered=lambda subject: subject.startswith("webhooks.mollie_nl."),
)


def item(event_id: str, event_type: str, **body: object) -> Confirmed:
    doc = {"event_id": event_id, "payment_id": "tr_7UhSN1zuXS", **body}
    return Confirmed(event_id, event_type, orjson.dumps(doc))


PAID = item("tr_7UhSN1zuXS:paid", "payment.paid")
REFUNDED = item("tr_7UhSN1zuXS:refund:re_4qqhO89gsT", "refund.refunded", object_id="re_4qqhO89gsT")


def test_each_item_becomes_an_event_of_the_provider() -> None:
    """Its own id, type and body, the provider's subject for its type, source `confirmed`,
    no headers, and no order key when the provider has no rules."""
    assert confirmed_events(PLAIN, [PAID, REFUNDED], AT) == [
        Event(
            "mollie_nl",
            "tr_7UhSN1zuXS:paid",
            "payment.paid",
            "webhooks.mollie_nl.payment.paid",
            {},
            PAID.body,
            AT,
            source=Source.CONFIRMED,
        ),
        Event(
            "mollie_nl",
            "tr_7UhSN1zuXS:refund:re_4qqhO89gsT",
            "refund.refunded",
            "webhooks.mollie_nl.refund.refunded",
            {},
            REFUNDED.body,
            AT,
            source=Source.CONFIRMED,
        ),
    ]


def test_the_source_is_stored_as_confirmed() -> None:
    """`processed_webhooks.source` takes the enum's value."""
    (event,) = confirmed_events(PLAIN, [PAID], AT)
    assert event.source == "confirmed"


@pytest.mark.parametrize(
    ("shaping", "confirmed", "order_key"),
    [
        (ORDERED, PAID, "tr_7UhSN1zuXS"),  # the catch-all rule
        (ORDERED, REFUNDED, "re_4qqhO89gsT"),  # the first rule whose glob takes the type
        (Shaping("mollie_nl", order_rules=ORDERED.order_rules), PAID, None),  # not ordered
        (
            Shaping("mollie_nl", order_rules=ORDERED.order_rules, ordered=lambda _: False),
            PAID,
            None,
        ),
        (Shaping("mollie_nl", ordered=ORDERED.ordered), PAID, None),  # no rules
    ],
)
def test_the_order_key_comes_from_the_rules(
    shaping: Shaping, confirmed: Confirmed, order_key: str | None
) -> None:
    """An ordered subject gets its key by the provider's rules; any other event none."""
    (event,) = confirmed_events(shaping, [confirmed], AT)
    assert event.failure is None
    assert event.order_key == order_key


def test_repeats_of_an_id_after_the_first_are_dropped() -> None:
    """The gate takes each id once per statement: the first item of an id wins."""
    again = Confirmed(PAID.event_id, "payment.paid", b'{"again": true}')
    events = confirmed_events(PLAIN, [PAID, REFUNDED, again, PAID], AT)
    assert [(e.event_id, e.body) for e in events] == [
        (PAID.event_id, PAID.body),
        (REFUNDED.event_id, REFUNDED.body),
    ]


def test_items_keep_their_order() -> None:
    """The answer's order is the order the changes happened in: it is kept."""
    events = confirmed_events(PLAIN, [REFUNDED, PAID], AT)
    assert [e.event_id for e in events] == [REFUNDED.event_id, PAID.event_id]


def test_no_items_no_events() -> None:
    """An answer holding no change (a payment still open) records nothing."""
    assert confirmed_events(PLAIN, [], AT) == []


@pytest.mark.parametrize(
    ("confirmed", "error_class", "event_type"),
    [
        (Confirmed("tr_x:paid", PAID_AS, b"[1, 2]"), E.PAYLOAD_NOT_OBJECT, PAID_AS),
        (Confirmed("tr_x:paid", PAID_AS, b'"paid"'), E.PAYLOAD_NOT_OBJECT, PAID_AS),
        (Confirmed("tr_x:paid", PAID_AS, b"{not json"), E.PAYLOAD_NOT_OBJECT, PAID_AS),
        # Off the provider's `event_types`: the type is kept for the dead letter.
        (
            item("tr_x:chb_1", "chargeback.received"),
            E.EVENT_TYPE_NOT_ALLOWED,
            "chargeback.received",
        ),
        # A type that cannot make a subject is not kept.
        (item("tr_x:paid", "p" * 201), E.EVENT_TYPE_INVALID, None),
        (item("tr_x:paid", "payment.\x1bpaid"), E.EVENT_TYPE_INVALID, None),
    ],
)
def test_an_item_that_cannot_be_published_is_recorded_with_its_failure(
    confirmed: Confirmed, error_class: ErrorClass, event_type: str | None
) -> None:
    """The row is kept under the item's id, parked with the failure, never published."""
    (event,) = confirmed_events(ORDERED, [confirmed], AT)
    assert event.failure is not None
    assert event.failure.error_class is error_class
    assert (event.event_id, event.event_type) == (confirmed.event_id, event_type)
    assert (event.subject, event.order_key) == (None, None)
    assert event.source == Source.CONFIRMED and event.body == confirmed.body


@pytest.mark.parametrize(
    "event_id",
    [
        "tr_x:\x00paid",
        "tr_x:paid\n",
        "tr_x:\x7fpaid",
        "tr_x:" + "p" * 251,  # 256 characters: one past the limit
    ],
)
def test_a_bad_id_is_recorded_under_the_body_digest(event_id: str) -> None:
    """As a webhook's would be: the id cannot key the gate, so the body's digest does,
    and the event is parked as EVENT_ID_INVALID (before any other fault of the item)."""
    confirmed = Confirmed(event_id, "payment.paid", b"[]")  # not an object either
    (event,) = confirmed_events(ORDERED, [confirmed], AT)
    assert event.event_id == body_digest_id(b"[]")
    assert event.failure is not None
    assert event.failure.error_class is ErrorClass.EVENT_ID_INVALID
    assert (event.event_type, event.subject, event.order_key) == ("payment.paid", None, None)


def test_an_id_of_the_longest_length_is_kept() -> None:
    """255 characters is still an id."""
    event_id = "tr_x:" + "p" * 250
    (event,) = confirmed_events(PLAIN, [item(event_id, "payment.paid")], AT)
    assert (event.event_id, event.failure) == (event_id, None)


def test_items_with_bad_ids_and_the_same_body_are_one_row() -> None:
    """Their digest ids are equal, so the second is a repeat, as a resent webhook is."""
    first = Confirmed("tr_x:\x00a", "payment.paid", b"{}")
    second = Confirmed("tr_x:\x00b", "payment.paid", b"{}")
    assert len(confirmed_events(PLAIN, [first, second], AT)) == 1


def test_a_blank_id_is_recorded_under_the_body_digest() -> None:
    """A blank id would key every such item of the provider as one row."""
    (event,) = confirmed_events(PLAIN, [Confirmed("", "payment.paid", b"{}")], AT)
    assert event.event_id == body_digest_id(b"{}")
    assert event.failure is not None
    assert event.failure.error_class is ErrorClass.EVENT_ID_INVALID
