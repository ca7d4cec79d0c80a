"""The dead-letter list's derived columns: severity from the class, and the amount read
from the body as the settlement worker reads it."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.dlq.columns import (
    AMOUNT_BODY_MAX_BYTES,
    CRITICAL_CLASSES,
    Amount,
    Severity,
    amount_of,
    severity_of,
)
from gateway.errors import ErrorClass, Family, GatewayError

SCHEMES = {"stripe": "stripe", "github": "github"}


def _subclasses(cls: type[GatewayError]) -> set[type[GatewayError]]:
    found: set[type[GatewayError]] = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_critical_classes_are_those_the_worker_alerts_on() -> None:
    """Every error that says `critical` is a critical row, and the ledger not answering
    (alerted on when its retries are spent); no other class is."""
    flagged = {c.error_class for c in _subclasses(GatewayError) if c.critical is True}
    assert flagged | {ErrorClass.LEDGER_UNAVAILABLE} == CRITICAL_CLASSES


@pytest.mark.parametrize(
    ("error_class", "severity"),
    [
        ("LEDGER_IMBALANCE", Severity.CRITICAL),
        ("LEDGER_UNAVAILABLE", Severity.CRITICAL),
        ("ledger_id_collision", Severity.CRITICAL),  # stored case does not matter
        ("RATE_UNAVAILABLE", Severity.WARNING),  # a dependency: re-driven when it answers
        ("UNKNOWN_MERCHANT", Severity.ERROR),  # permanent: a person fixes the data
        ("NOT_A_CLASS_WE_KNOW", Severity.ERROR),  # another version's row: never hidden
    ],
)
def test_severity_of_a_class(error_class: str, severity: Severity) -> None:
    assert severity_of(error_class) is severity


def test_every_transient_class_that_is_not_critical_is_a_warning() -> None:
    for member in ErrorClass:
        if member.family is Family.TRANSIENT and member not in CRITICAL_CLASSES:
            assert severity_of(member.value) is Severity.WARNING, member


def _stripe(amount: object, currency: str = "usd") -> bytes:
    obj = {
        "id": "pi_1",
        "amount_received": amount,
        "currency": currency,
        "metadata": {"merchant_id": "m_1"},
    }
    return orjson.dumps(
        {"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": obj}}
    )


@pytest.mark.parametrize(
    ("provider", "event_type", "body", "amount"),
    [
        ("stripe", "payment_intent.succeeded", _stripe(1250), Amount(1250, "USD")),
        ("stripe", "payment_intent.succeeded", _stripe(500, "jpy"), Amount(500, "JPY")),
        ("stripe", "payment_intent.succeeded", _stripe("12.50"), None),  # unreadable: parked
        ("stripe", "customer.created", _stripe(1250), None),  # moves no money
        ("github", "push", b"{}", None),  # a source that never settles
        ("stripe", "payment_intent.succeeded", None, None),  # removed by retention
        ("stripe", "payment_intent.succeeded", b"not json", None),
        ("stripe", None, _stripe(1250), None),  # no event row, no type
    ],
)
def test_the_amount_an_event_would_move(
    provider: str, event_type: str | None, body: bytes | None, amount: Amount | None
) -> None:
    assert amount_of(provider, event_type, body, SCHEMES) == amount


def test_a_body_over_the_list_limit_is_not_read() -> None:
    """A list reads at most AMOUNT_BODY_MAX_BYTES of any one body."""
    padded = orjson.loads(_stripe(1250))
    padded["pad"] = "x" * AMOUNT_BODY_MAX_BYTES
    assert amount_of("stripe", "payment_intent.succeeded", orjson.dumps(padded), SCHEMES) is None


def test_amounts_read_as_people_and_json_want_them() -> None:
    assert Amount(-1250, "USD").text() == "-12.50 USD"
    assert Amount(500, "JPY").text() == "500 JPY"
    assert Amount(1250, "USD").doc() == {"amount_minor": 1250, "currency": "USD"}
