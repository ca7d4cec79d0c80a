"""Adyen: the `adyen` scheme held to Adyen's own library (`Adyen.util`, adyen 16.0.0)
and its published vectors, the batch splitter, and the events as money movements,
table-driven.

The vectors come from Adyen/adyen-python-api-library (MIT), commit b6f49792:
`test/UtilTest.py::test_notification_request_item_hmac` (key `44782DEF…A056`) and the
mocks `test/mocks/util/{backslash,colon,forwardslash,mixed}_notification.json` (key
`74F490DD…9174`, from `test_webhooks_with_slashes`). Of each mock only the eight signed
fields and its `hmacSignature` are transcribed here; the rest of the item is not
signed. Three of the four mocks fail if `\\` and `:` are escaped: the trap a home-made
verifier falls into.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

import orjson
import pytest
from Adyen.util import (  # type: ignore[import-untyped]  # dev lock only: Adyen's own
    generate_notification_sig,
    is_valid_hmac_notification,
)

from gateway.core.money import minor_exponent
from gateway.core.providers import adyen
from gateway.core.providers.adyen import instruction
from gateway.core.settlement.follow_ups import Claim, Payment, decide
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures import adyen_items
from gateway.core.signatures.adyen_items import SCHEME, item_signature, signed_body, split
from gateway.core.signatures.base import SchemeParams
from gateway.errors import (
    BatchTooLarge,
    FieldTypeInvalid,
    InvalidAmount,
    MissingField,
    ProviderAmountInvalid,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)

K = SettlementKind
KEY_A = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"  # UtilTest.py
KEY_B = "74F490DD33F7327BAECC88B2947C011FC02D014A473AAA33A8EC93E4DC069174"  # the mocks'

UTIL_TEST_ITEM: dict[str, Any] = {
    "pspReference": "7914073381342284",
    "merchantReference": "TestPayment-1407325143704",
    "merchantAccountCode": "TestMerchant",
    "amount": {"currency": "EUR", "value": 1130},
    "eventCode": "AUTHORISATION",
    "success": "true",
    "eventDate": "2019-05-06T17:15:34.121+02:00",
    "operations": ["CANCEL", "CAPTURE", "REFUND"],
    "paymentMethod": "visa",
}


def mock(psp: str, reference: str) -> dict[str, Any]:
    """The signed fields of one of the library's `*_notification.json` mocks."""
    return {
        "pspReference": psp,
        "merchantAccountCode": "AntoniStroinski",
        "merchantReference": reference,
        "amount": {"currency": "EUR", "value": 1000},
        "eventCode": "AUTHORISATION",
        "success": "true",
    }


#: (source, key, item, its published signature)
PUBLISHED = [
    ("UtilTest.py", KEY_A, UTIL_TEST_ITEM, "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="),
    ("backslash_notification.json", KEY_B, mock("T7FD4VM4D3RZNN82", r"\\slashes are fun"),
     "nIgT81gaB5oJpn2jPXupDq68iRo2wUlBsuYjtYfwKqo="),
    ("colon_notification.json", KEY_B, mock("M8NB66SBZSGLNK82", ":slashes are fun"),
     "2EQYm7YJpKO4EtHSPu55SQTyWf8dkW5u2nD1tJFpViA="),
    ("forwardslash_notification.json", KEY_B, mock("X3GWNS6KJ8NKGK82", "//slashes are fun"),
     "9Z0xdpG9Xi3zcmXv14t/BvMBut77O/Xq9D4CQXSDUi4="),
    ("mixed_notification.json", KEY_B, mock("ZVWN7D3WSMK2WN82", r"\:/\/slashes are fun"),
     "CZErGCNQaSsxbaQfZaJlakqo7KPP+mIa8a+wx3yNs9A="),
]  # fmt: skip


def theirs(item: dict[str, Any], key: str) -> str:
    """Adyen's library's signature of an item."""
    return bytes(generate_notification_sig(item, key)).decode()


def signed(item: dict[str, Any], key: str) -> dict[str, Any]:
    """A copy of item carrying its signature under key."""
    item = copy.deepcopy(item)
    item.setdefault("additionalData", {})["hmacSignature"] = item_signature(item, key)
    return item


def body_of(*items: dict[str, Any], live: str = "false") -> bytes:
    return orjson.dumps(
        {"live": live, "notificationItems": [{"NotificationRequestItem": i} for i in items]}
    )


def ours(body: bytes, *keys: str) -> bool:
    try:
        SCHEME.verify(SchemeParams(secrets=keys), {}, body, 0)
    except SignatureMismatch:
        return False
    return True


# --- the signature, against Adyen's library and vectors ------------------------------


@pytest.mark.parametrize(("source", "key", "item", "expected"), PUBLISHED)
def test_published_vectors_sign_and_verify_as_adyens_library_does(
    source: str, key: str, item: dict[str, Any], expected: str
) -> None:
    """Each published item gets its published signature from us and from the library,
    and the delivery carrying it verifies with both."""
    assert item_signature(item, key) == theirs(item, key) == expected, source
    with_signature = {**item, "additionalData": {"hmacSignature": expected}}
    assert is_valid_hmac_notification(with_signature, key) is True
    assert ours(body_of(with_signature), key)


def test_the_signed_strings_are_the_documented_ones_without_escaping() -> None:
    """The A7 strings: `:` and `\\` go in as they are (no HPP-style escaping)."""
    assert adyen_items.signed_message(UTIL_TEST_ITEM) == (
        b"7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true"
    )
    assert adyen_items.signed_message(PUBLISHED[2][2]) == (
        b"M8NB66SBZSGLNK82::AntoniStroinski::slashes are fun:1000:EUR:AUTHORISATION:true"
    )
    escaped = 0
    for _, key, item, expected in PUBLISHED[1:]:
        reference = item["merchantReference"].replace("\\", "\\\\").replace(":", "\\:")
        escaped += item_signature({**item, "merchantReference": reference}, key) != expected
    assert escaped == 3  # all but the forward slashes, which escaping leaves alone


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("no originalReference (an authorisation)", {}),
        ("an originalReference (a modification)", {"originalReference": "9913140798220028"}),
        ("no pspReference", {"pspReference": None}),
        ("no merchantReference", {"merchantReference": None}),
        ("no eventCode nor success", {"eventCode": None, "success": None}),
        ("success as a JSON boolean", {"success": True}),
        ("merchantReference null", {"merchantReference": ...}),
        ("value as a string", {"amount": {"value": "1130", "currency": "EUR"}}),
        ("value as a float", {"amount": {"value": 11.3, "currency": "EUR"}}),
        ("value zero (a report)", {"amount": {"value": 0, "currency": "EUR"}}),
        ("non-ASCII reference", {"merchantReference": "Café ☕ 注文"}),
        ("reference of colons", {"merchantReference": "a:b::c\\:"}),
        ("a top-level value the amount's overrides", {"value": 99, "currency": "USD"}),
    ],
)
def test_absent_fields_and_odd_values_agree_with_the_library(
    case: str, change: dict[str, Any]
) -> None:
    """`None` in `change` removes the field, `...` makes it JSON null."""
    item = copy.deepcopy(UTIL_TEST_ITEM)
    for name, value in change.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = None if value is ... else value
    assert item_signature(item, KEY_A) == theirs(item, KEY_A), case


@pytest.mark.parametrize(
    "amount", [None, {"value": 1130}, {"currency": "EUR"}], ids=["none", "no currency", "no value"]
)
def test_an_item_without_a_full_amount_cannot_be_signed(amount: dict[str, Any] | None) -> None:
    """The library raises KeyError; we refuse the delivery as malformed."""
    item = {k: v for k, v in UTIL_TEST_ITEM.items() if k != "amount"}
    if amount is not None:
        item["amount"] = amount
    with pytest.raises(KeyError):
        generate_notification_sig(item, KEY_A)
    with pytest.raises(ValueError, match="amount"):
        item_signature(item, KEY_A)
    item["additionalData"] = {"hmacSignature": "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="}
    with pytest.raises(SignatureMalformed, match=r"notificationItems\[0\]"):
        SCHEME.verify(SchemeParams(secrets=(KEY_A,)), {}, body_of(item), 0)


TAMPERED = [
    ("pspReference", {"pspReference": "7914073381342285"}),
    ("originalReference", {"originalReference": "9913140798220028"}),
    ("merchantAccountCode", {"merchantAccountCode": "OtherMerchant"}),
    ("merchantReference", {"merchantReference": "TestPayment-1407325143705"}),
    ("amount.value", {"amount": {"currency": "EUR", "value": 1131}}),
    ("amount.currency", {"amount": {"currency": "USD", "value": 1130}}),
    ("eventCode", {"eventCode": "CAPTURE"}),
    ("success", {"success": "false"}),
]


@pytest.mark.parametrize(
    ("case", "change", "signed_with", "keys"),
    [
        ("valid", {}, KEY_A, (KEY_A,)),
        *((f"tampered {name}", change, KEY_A, (KEY_A,)) for name, change in TAMPERED),
        ("unsigned field changed (eventDate)", {"eventDate": "2030-01-01"}, KEY_A, (KEY_A,)),
        ("unsigned field changed (reason)", {"reason": "anything"}, KEY_A, (KEY_A,)),
        ("rotated: the second of two keys", {}, KEY_B, (KEY_A, KEY_B)),
        ("rotated: the first of two keys", {}, KEY_A, (KEY_A, KEY_B)),
        ("rotated out", {}, KEY_B, (KEY_A,)),
    ],
)
def test_our_verifier_agrees_with_adyens(
    case: str, change: dict[str, Any], signed_with: str, keys: tuple[str, ...]
) -> None:
    """Signed under one key, changed, judged by both; the library takes one key, so it
    accepts when any of ours does."""
    item = {**signed(UTIL_TEST_ITEM, signed_with), **change}
    theirs_ok = any(is_valid_hmac_notification(copy.deepcopy(item), key) for key in keys)
    assert ours(body_of(item), *keys) is theirs_ok, case
    assert theirs_ok is (case == "valid" or "unsigned" in case or "rotated: " in case), case


# --- verification of whole deliveries ------------------------------------------------

ITEMS = [
    signed({**UTIL_TEST_ITEM, "pspReference": f"79140733813422{n}"}, KEY_A) for n in (84, 85, 86)
]


def test_every_item_is_checked_not_only_the_first() -> None:
    """Adyen's library looks at the first item only; a tampered third fails here."""
    assert ours(body_of(*ITEMS), KEY_A)
    tampered = [*ITEMS[:2], {**ITEMS[2], "amount": {"currency": "EUR", "value": 9999}}]
    assert is_valid_hmac_notification(orjson.loads(body_of(*tampered)), KEY_A) is True
    with pytest.raises(SignatureMismatch, match=r"notificationItems\[2\] \(1 of 3"):
        SCHEME.verify(SchemeParams(secrets=(KEY_A,)), {}, body_of(*tampered), 0)


def without_signature(item: dict[str, Any], extra: Any) -> dict[str, Any]:
    """item with `additionalData` replaced (`...`: removed)."""
    item = {k: v for k, v in item.items() if k != "additionalData"}
    return item if extra is ... else {**item, "additionalData": extra}


SIG = ITEMS[0]["additionalData"]["hmacSignature"]


@pytest.mark.parametrize(
    ("case", "body", "error"),
    [
        ("no additionalData", body_of(without_signature(ITEMS[0], ...)), SignatureMissing),
        ("no hmacSignature", body_of(without_signature(ITEMS[0], {"x": "1"})), SignatureMissing),
        ("empty", body_of(without_signature(ITEMS[0], {"hmacSignature": ""})), SignatureMissing),
        ("null", body_of(without_signature(ITEMS[0], {"hmacSignature": None})), SignatureMissing),
        ("second item unsigned", body_of(ITEMS[0], without_signature(ITEMS[1], ...)),
         SignatureMissing),
        ("not base64", body_of(without_signature(ITEMS[0], {"hmacSignature": "@@@@"})),
         SignatureMalformed),
        ("31 bytes", body_of(without_signature(ITEMS[0], {"hmacSignature": "A" * 40 + "AA=="})),
         SignatureMalformed),
        ("hex, not base64", body_of(without_signature(ITEMS[0], {"hmacSignature": "ab" * 32})),
         SignatureMalformed),
        ("not a string", body_of(without_signature(ITEMS[0], {"hmacSignature": 5})),
         SignatureMalformed),
        ("additionalData a string", body_of(without_signature(ITEMS[0], "x")), SignatureMalformed),
        ("not JSON", b"hmacSignature=" + SIG.encode(), SignatureMalformed),
        ("not an object", b"[]", SignatureMalformed),
        ("no items", b'{"live": "false", "notificationItems": []}', SignatureMalformed),
        ("items not a list", b'{"notificationItems": {"a": 1}}', SignatureMalformed),
        ("item without NotificationRequestItem", b'{"notificationItems": [{"x": {}}]}',
         SignatureMalformed),
        ("a missing signature before a mismatch",
         body_of({**ITEMS[0], "success": "false"}, without_signature(ITEMS[1], ...)),
         SignatureMissing),
    ],
)  # fmt: skip
def test_refusals(case: str, body: bytes, error: type[Exception]) -> None:
    """Everything is parsed and decoded before any HMAC is compared."""
    with pytest.raises(error):
        SCHEME.verify(SchemeParams(secrets=(KEY_A,)), {}, body, 0)


@pytest.mark.parametrize("bad", ["not-hex", "ABC", "", "  ", "44782DEF547AAA06C910C43932B1EB0CZZ"])
def test_a_secret_that_is_not_hex_is_refused_once_without_being_named(bad: str) -> None:
    with pytest.raises(ValueError, match="secret 2 of 2") as caught:
        SCHEME.verifier(SchemeParams(secrets=(KEY_A, bad)))
    assert not bad.strip() or bad not in str(caught.value)
    with pytest.raises(ValueError, match="secret 1 of 1"):
        SCHEME.sign(SchemeParams(secrets=(bad,)), b"{}", 0)


def test_a_key_copied_with_blanks_or_in_lower_case_still_verifies() -> None:
    assert ours(body_of(*ITEMS), f" {KEY_A.lower()}\n")


def test_signed_body_signs_every_item_as_adyen_does() -> None:
    """`sign` has no header to give; `signed_body` is what a sender uses."""
    unsigned = body_of(UTIL_TEST_ITEM, {**UTIL_TEST_ITEM, "pspReference": "X"})
    assert SCHEME.sign(SchemeParams(secrets=(KEY_B,)), unsigned, 0) == {}
    body = signed_body(unsigned, KEY_B)
    assert ours(body, KEY_B) and not ours(body, KEY_A)
    assert is_valid_hmac_notification(orjson.loads(body), KEY_B) is True
    first = orjson.loads(body)["notificationItems"][0]["NotificationRequestItem"]
    assert first["additionalData"]["hmacSignature"] == theirs(UTIL_TEST_ITEM, KEY_B)
    with pytest.raises(ValueError, match="not JSON"):
        signed_body(b"nope", KEY_B)


def test_what_the_scheme_says_about_itself() -> None:
    params = SchemeParams(secrets=(KEY_A,))
    doc = orjson.loads(body_of(ITEMS[0]))
    assert SCHEME.name == "adyen"
    assert SCHEME.required_headers(params) == ()
    assert SCHEME.stored_headers(params) == () == SCHEME.signature_headers(params)
    assert SCHEME.authenticates_id(params) is True
    assert SCHEME.replay_digest(params, {}, body_of(ITEMS[0])) is None
    assert SCHEME.id_ref(params).read({}, doc) == "7914073381342284:AUTHORISATION:true"
    assert SCHEME.type_ref(params).read({}, doc) == "AUTHORISATION"


def test_new_event_ids_look_like_psp_references_and_follow_the_uuid() -> None:
    a = SCHEME.new_event_id("0b1c3c1e-3f7e-4a45-9f36-0b3c5d1b9a11")
    assert re.fullmatch(r"[0-9A-Z]{16}", a)
    assert a == SCHEME.new_event_id("0b1c3c1e-3f7e-4a45-9f36-0b3c5d1b9a11")
    assert a != SCHEME.new_event_id("0b1c3c1e-3f7e-4a45-9f36-0b3c5d1b9a12")


# --- split ---------------------------------------------------------------------------


def test_a_body_of_one_item_is_returned_byte_for_byte() -> None:
    body = b'{ "live" : "false",\n  "notificationItems" : [ {"NotificationRequestItem":{}} ] }\n'
    assert split(body, 6, 10_000) == (body,)
    assert split(body, 6, 10_000)[0] is body


def test_several_items_become_bodies_that_verify_on_their_own() -> None:
    body = body_of(*ITEMS, live="true")
    parts = split(body, 6, 10_000)
    assert len(parts) == 3
    for part, item in zip(parts, ITEMS, strict=True):
        assert orjson.loads(part) == {
            "live": "true",
            "notificationItems": [{"NotificationRequestItem": item}],
        }
        assert ours(part, KEY_A)
    assert split(body, 3, 10_000) == parts  # exactly at the bound


def test_a_body_without_live_is_split_without_inventing_one() -> None:
    body = orjson.dumps({"notificationItems": [{"NotificationRequestItem": i} for i in ITEMS]})
    assert all(set(orjson.loads(part)) == {"notificationItems"} for part in split(body, 6, 10_000))


def test_one_tampered_item_fails_alone_once_split() -> None:
    tampered = {**ITEMS[1], "success": "false"}
    assert [ours(part, KEY_A) for part in split(body_of(ITEMS[0], tampered), 6, 10_000)] == [
        True,
        False,
    ]


@pytest.mark.parametrize(
    ("case", "body", "items_max", "item_bytes_max", "bound"),
    [
        ("seven items", body_of(*(ITEMS * 3)[:7]), 6, 10_000, "at most 6"),
        ("a large item", body_of(ITEMS[0], {**ITEMS[1], "reason": "x" * 2000}), 6, 1_000,
         "at most 1000"),
    ],
)  # fmt: skip
def test_bounds_refuse_the_whole_request(
    case: str, body: bytes, items_max: int, item_bytes_max: int, bound: str
) -> None:
    with pytest.raises(BatchTooLarge, match=bound):
        split(body, items_max, item_bytes_max)


def test_one_item_is_bounded_by_the_body_limit_alone() -> None:
    """A single item comes as it was sent (`[http] max_body_bytes` bounds it): refusing
    it for its size would refuse a genuine notification on every retry."""
    body = body_of({**ITEMS[1], "reason": "x" * 2000})
    assert split(body, 6, 1_000) == (body,)


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[1, 2]", b'"text"', b"{}", b'{"notificationItems": {}}',
     b'{"notificationItems": []}', b'{"notificationItems": "x"}', b"\xff\xfe"],
)  # fmt: skip
def test_a_body_that_is_not_a_batch_comes_back_whole(body: bytes) -> None:
    """Verification refuses it afterwards."""
    assert split(body, 6, 10_000) == (body,)


# --- money movements -----------------------------------------------------------------


def event(code: str, psp: str = "PSP1", original: str | None = "PAY1", success: str = "true",
          value: Any = 1000, currency: str = "EUR", **extra: Any) -> Any:  # fmt: skip
    """An event's parsed body, as the mapping receives it."""
    item: dict[str, Any] = {"pspReference": psp, "eventCode": code, "success": success,
                            "merchantAccountCode": "PlatformECOM",
                            "amount": {"value": value, "currency": currency}, **extra}  # fmt: skip
    if original is not None:
        item["originalReference"] = original
    return orjson.loads(body_of(item))


@pytest.mark.parametrize(
    ("code", "psp", "original", "kind", "payment", "key"),
    [
        ("AUTHORISATION", "PAY1", None, K.AUTHORISATION, "PAY1", "PAY1"),
        ("CAPTURE", "CAP1", "PAY1", K.CAPTURE, "PAY1", "CAP1"),
        ("CANCELLATION", "CAN1", "PAY1", K.VOID, "PAY1", "PAY1"),
        ("REFUND", "REF1", "PAY1", K.REFUND, "PAY1", "REF1"),
        ("REFUND_FAILED", "REF1", "PAY1", K.REFUND_REVERSAL, "PAY1", "REF1"),
        ("REFUNDED_REVERSED", "REF1", "PAY1", K.REFUND_REVERSAL, "PAY1", "REF1"),
        ("CHARGEBACK", "DSP1", "PAY1", K.CHARGEBACK, "PAY1", "DSP1"),
        ("CHARGEBACK_REVERSED", "DSP1", "PAY1", K.CHARGEBACK_REVERSAL, "PAY1", "DSP1"),
        ("SECOND_CHARGEBACK", "DSP1", "PAY1", K.CHARGEBACK, "PAY1", "DSP1:SECOND_CHARGEBACK"),
    ],
)
def test_each_money_event_is_its_movement(
    code: str, psp: str, original: str | None, kind: K, payment: str, key: str | None
) -> None:
    found = instruction(code, event(code, psp, original))
    assert found == SettlementInstruction(
        settlement_id=payment, kind=kind, merchant_id=None, amount_minor=1000, currency="EUR",
        refund_id=key, source_event_id=f"{psp}:{code}:true",
    )  # fmt: skip
    assert adyen.MOVEMENT_TYPES[code] == (kind,)


@pytest.mark.parametrize(
    ("case", "code", "success"),
    [
        ("a refused authorisation", "AUTHORISATION", "false"),
        ("a refused capture", "CAPTURE", "false"),
        ("a refused refund", "REFUND", "false"),
        ("a refused cancellation", "CANCELLATION", "false"),
        ("a failed capture (see the module)", "CAPTURE_FAILED", "true"),
        ("a notice of chargeback", "NOTIFICATION_OF_CHARGEBACK", "true"),
        ("a report", "REPORT_AVAILABLE", "true"),
        ("an unknown code", "SOMETHING_NEW", "true"),
    ],
)
def test_events_that_move_no_money(case: str, code: str, success: str) -> None:
    assert instruction(code, event(code, success=success)) is None, case


@pytest.mark.parametrize(
    ("case", "code", "doc", "error", "field"),
    [
        ("capture without its payment", "CAPTURE", event("CAPTURE", original=None),
         MissingField, "notificationItems.0.NotificationRequestItem.originalReference"),
        ("no pspReference", "REFUND", event("REFUND", psp=""), FieldTypeInvalid,
         "notificationItems.0.NotificationRequestItem.pspReference"),
        ("success neither true nor false", "REFUND", event("REFUND", success="yes"),
         FieldTypeInvalid, "notificationItems.0.NotificationRequestItem.success"),
        ("value as text", "REFUND", event("REFUND", value="1000"), FieldTypeInvalid,
         "notificationItems.0.NotificationRequestItem.amount.value"),
        ("bad currency", "REFUND", event("REFUND", currency="EURO"), FieldTypeInvalid,
         "notificationItems.0.NotificationRequestItem.amount.currency"),
        ("two items", "REFUND", orjson.loads(body_of(ITEMS[0], ITEMS[1])), FieldTypeInvalid,
         "notificationItems"),
        ("no items", "REFUND", {"live": "false"}, MissingField, "notificationItems"),
        ("no item object", "REFUND", {"notificationItems": [{}]}, MissingField,
         "notificationItems.0.NotificationRequestItem"),
    ],
)  # fmt: skip
def test_unreadable_events_name_the_field(
    case: str, code: str, doc: Any, error: type[MissingField], field: str
) -> None:
    with pytest.raises(error) as caught:
        instruction(code, doc)
    assert caught.value.field == field, case


def test_an_amount_of_zero_is_refused() -> None:
    with pytest.raises(InvalidAmount):
        instruction("REFUND", event("REFUND", value=0))


@pytest.mark.parametrize(
    ("extra", "merchant"),
    [
        ({"additionalData": {"metadata.merchant_id": "m_1"}}, "m_1"),
        ({"additionalData": {"metadata": {"merchant_id": "m_2"}}}, "m_2"),
        ({"additionalData": {"metadata.merchant_id": 7}}, None),
        ({"additionalData": {"metadata.merchant_id": ""}}, None),
        ({}, None),  # merchantAccountCode is Adyen's account, never the merchant
    ],
)
def test_the_merchant_comes_from_the_payments_metadata(
    extra: dict[str, Any], merchant: str | None
) -> None:
    found = instruction("AUTHORISATION", event("AUTHORISATION", original=None, **extra))
    assert found is not None and found.merchant_id == merchant


@pytest.mark.parametrize(
    ("currency", "value", "minor"),
    [
        ("CLP", 150_000, 1_500),  # Adyen: 2 decimals, ISO: 0
        ("ISK", 279_000, 2_790),  # Adyen: 2 decimals, ISO: 0
        ("IDR", 15_000, 1_500_000),  # Adyen: 0 decimals, ISO: 2
        ("CVE", 10, 1_000),  # Adyen: 0 decimals, ISO: 2
        ("EUR", 1_000, 1_000),
        ("JPY", 500, 500),
        ("KWD", 1_234, 1_234),
    ],
)
def test_amounts_are_read_with_adyens_decimals(currency: str, value: int, minor: int) -> None:
    found = instruction("REFUND", event("REFUND", value=value, currency=currency))
    assert found is not None and (found.amount_minor, found.currency) == (minor, currency)


@pytest.mark.parametrize(("currency", "value"), [("CLP", 150_050), ("ISK", 50)])
def test_fractions_of_a_peso_or_krona_are_refused(currency: str, value: int) -> None:
    with pytest.raises(ProviderAmountInvalid, match=r"amount\.value"):
        instruction("REFUND", event("REFUND", value=value, currency=currency))


def test_each_units_row_is_an_exception_to_iso() -> None:
    assert {code: minor_exponent(code) != rule.exponent for code, rule in adyen.UNITS.items()} == {
        "CLP": True, "CVE": True, "IDR": True, "ISK": True,
    }  # fmt: skip


# --- the keys net as the ledger expects (`core.settlement.follow_ups`) --------------------------


def moved(*events: tuple[str, str]) -> int:
    """What a payment captured for 1000 EUR has moved out after `events` (code, psp)."""
    payment = Payment("PAY1", 1000, "EUR", "EUR", Decimal(1))
    claims: list[Claim] = []
    out = 0
    for code, psp in events:
        found = instruction(code, event(code, psp))
        assert found is not None
        due = decide(claims, found, payment)
        if due is not None:
            claims.append(due.claim)
            out += found.kind.balance_sign * -1 * due.claim.due_minor
    return out


@pytest.mark.parametrize(
    ("case", "events", "out"),
    [
        ("refund", [("REFUND", "REF1")], 1000),
        ("refund failed", [("REFUND", "REF1"), ("REFUND_FAILED", "REF1")], 0),
        ("failure first", [("REFUND_FAILED", "REF1"), ("REFUND", "REF1")], 0),
        ("refund reversed", [("REFUND", "REF1"), ("REFUNDED_REVERSED", "REF1")], 0),
        ("both codes for one refund",
         [("REFUND", "REF1"), ("REFUND_FAILED", "REF1"), ("REFUNDED_REVERSED", "REF1")], 0),
        ("chargeback", [("CHARGEBACK", "DSP1")], 1000),
        ("chargeback won", [("CHARGEBACK", "DSP1"), ("CHARGEBACK_REVERSED", "DSP1")], 0),
        ("second chargeback",
         [("CHARGEBACK", "DSP1"), ("CHARGEBACK_REVERSED", "DSP1"), ("SECOND_CHARGEBACK", "DSP1")],
         1000),
        ("second chargeback before the reversal",
         [("CHARGEBACK", "DSP1"), ("SECOND_CHARGEBACK", "DSP1"), ("CHARGEBACK_REVERSED", "DSP1")],
         1000),
        ("redelivered", [("CHARGEBACK", "DSP1"), ("CHARGEBACK", "DSP1")], 1000),
    ],
)  # fmt: skip
def test_follow_ups_net_to_what_adyen_moved(
    case: str, events: list[tuple[str, str]], out: int
) -> None:
    assert moved(*events) == out, case


def test_a_colon_moved_between_signed_fields_is_refused() -> None:
    """The eight fields are joined with ":" unescaped: moving a ":" from one field to
    its neighbour signs the same text. Only `merchantReference` may hold one, so a
    genuine item's signature can never vouch for another reading of it (another id,
    payment or merchant)."""
    genuine = {"pspReference": "8815000000000001", "merchantAccountCode": "ShopA",
               "merchantReference": "order:42", "amount": {"value": 100, "currency": "EUR"},
               "eventCode": "AUTHORISATION", "success": "true"}  # fmt: skip
    genuine["additionalData"] = {"hmacSignature": item_signature(genuine, KEY_A)}
    shifted = {**genuine, "pspReference": "8815000000000001:", "originalReference": "ShopA",
               "merchantAccountCode": "order", "merchantReference": "42"}  # fmt: skip
    assert adyen_items.signed_message(shifted) == adyen_items.signed_message(genuine)
    params = SchemeParams(secrets=(KEY_A,))
    SCHEME.verify(params, {}, body_of(genuine), 0.0)
    with pytest.raises(SignatureMalformed, match="other than merchantReference"):
        SCHEME.verify(params, {}, body_of(shifted), 0.0)


def test_a_zero_value_authorisation_reserves_nothing() -> None:
    """Adyen authorises 0 to check or store a card: nothing to reserve, nothing parked."""
    item = {"pspReference": "PSPZERO", "eventCode": "AUTHORISATION", "success": "true",
            "amount": {"value": 0, "currency": "EUR"}, "merchantAccountCode": "M"}  # fmt: skip
    assert instruction("AUTHORISATION", orjson.loads(body_of(item))) is None
