"""NOWPayments' IPN: the `nowpayments` scheme held to NOWPayments' own Node.js code, the
text it signs written byte for byte as JavaScript writes it, and its money movements.

The vectors' signatures were made by running, under Node.js 20, NOWPayments' SDK
(NowPaymentsIO/nowpayments-sdk-nodejs, commit f92304313c35, `src/ipn.js`
`createWebhookSignature`: `JSON.stringify(sortObjectDeep(payload))`, not on npm) and the
`sortObject` example of NOWPayments' API documentation (its Postman collection
"NOWPayments API", section "Instant Payments Notifications") on these bodies and secret;
the two agree except on an array (a vector's fourth column). The signed texts are the
ones Node.js printed. The first body is the documentation's "Webhooks Examples" payment with
the comma it lacks after `payment_extra_ids` put back.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest

from gateway.core.events.shaper import webhook_shaper
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers import PROVIDERS
from gateway.core.providers.movements import instruction_of, may_move_money, movements_of
from gateway.core.providers.nowpayments import NOWPAYMENTS, document, exact_amount, instruction
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.nowpayments import (
    DEPTH_MAX,
    HEADER,
    SCHEME,
    js_number,
    parse_body,
    signed_forms,
)
from gateway.errors import (
    FieldTypeInvalid,
    InvalidAmount,
    MissingField,
    PayloadNotJson,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)

K = SettlementKind
SECRET = "np_ipn_secret_Vq3Lz8Rk"
PARAMS = SchemeParams(secrets=(SECRET,))
DOCS_EXAMPLE = b'{"payment_id":123456789,"parent_payment_id":987654321,"invoice_id":null,"payment_status":"finished","pay_address":"address","payin_extra_id":null,"price_amount":1,"price_currency":"usd","pay_amount":15,"actually_paid":15,"actually_paid_at_fiat":0,"pay_currency":"trx","order_id":null,"order_description":null,"purchase_id":"123456789","outcome_amount":14.8106,"outcome_currency":"trx","payment_extra_ids":null,"fee":{"currency":"btc","depositFee":0.09853637216235617,"withdrawalFee":0,"serviceFee":0}}'  # noqa: E501
USDT = b'{"payment_id":5077125051,"payment_status":"finished","pay_address":"TNDFkiSmBQorNFacb3735q8MnT29sn8BLn","price_amount":100,"price_currency":"usd","pay_amount":100.25,"actually_paid":100.25,"pay_currency":"usdttrc20","order_id":"m_np_1","order_description":"Plan Pro","purchase_id":"5837122679","created_at":"2026-12-06T10:00:00.000Z","updated_at":"2026-12-06T10:04:13.000Z","outcome_amount":99.75,"outcome_currency":"usdttrc20"}'  # noqa: E501
UNICODE = b'{"order_description":"caf\xc3\xa9 \xe2\x82\xac5 \xf0\x9f\x98\x80 a/b \xe2\x80\xa8 \\"q\\" \\\\ \\n\\u001f\\ud800","payment_status":"waiting","payment_id":7}'  # noqa: E501
NUMBERS = b'{"actually_paid":1.50,"pay_amount":1E-7,"price_amount":15.0,"outcome_amount":12345678901234567890,"payment_id":8,"payment_status":"confirming"}'  # noqa: E501
ARRAY = b'{"payment_id":9,"payment_status":"finished","payment_extra_ids":[{"b":2,"a":1},"x",[3]]}'
KEYS = b'{"b":1,"10":2,"9":3,"a":4,"4294967295":5,"_":6,"B":7,"payment_id":10,"payment_status":"sending"}'  # noqa: E501
PAYOUT = b'{"id":"5077125051","batch_withdrawal_id":"5014082209","status":"FINISHED","error":null,"currency":"usdttrc20","amount":"50","address":"address","fee":null,"extra_id":null,"hash":null,"ipn_callback_url":"callback_url","created_at":"2023-07-27T15:29:40.803Z","requested_at":null,"updated_at":null}'  # noqa: E501

#: (case, body, the SDK's signature, the documentation's where it differs)
VECTORS = [
    ("the documentation's example, `fee` nested", DOCS_EXAMPLE, "bd422a9ea9590032dcaff98644f2773dbc63e1759604c9bc78eeb0731b46b7620718e86ce27e2969aff0e26760613063e72d00b16333a9c44ff56255c61ac2a9", None),  # noqa: E501
    ("a USDT payment on Tron, finished", USDT, "ce1c38f6c4c70a7bdac6465a989ece7b25acbf5c9e1cf3615895bcfc690cc458f7d0ab38fbd6336f29d99c45db1d02c36e15ee6e1ad430b3c86f2e4460f43d29", None),  # noqa: E501
    ("non-ASCII, `/`, U+2028 raw; escapes; a lone surrogate", UNICODE, "f2b5156247cbcd7251479fe1265c215a85f29d06a7a38b5996b81068c84f03371f799969a9d722592d4ed85407013f90eb94733e276073b020e87b70a53f6461", None),  # noqa: E501
    ("numbers as JavaScript writes them", NUMBERS, "e8e6eb06d7c1bc4c9a820d213295c0c41ebde834c62498bdf3c6a68b7bad48fcf9a334e1bb8fadb2d87e7f2620eea0acedc692407ef789bd8d1be9fcd1b65bdf", None),  # noqa: E501
    ("an array: the SDK keeps it, the documentation makes it an object", ARRAY, "ee0f0b8e411f78e6294a15a747577924d6c8de26b974d64b17e683c7dd3b55e5e667fa4f12c3cf883d9fa5dcbf77aecfade51cc9f9c355081cd107434086a4d8", "e96be71e6673b2f977b0e07c970785499c5687fa2de02a9b8b3e3a2202ed20c270c7a50d996742553ac12040e8ee900e65525354c4ea807e31cae29c80ff2f02"),  # noqa: E501
    ("array-index keys first, in numeric order", KEYS, "1241c89b3ee8e490bf2138827eafe0261db33393d81fb5817f21a15aa3d7cce3186b0ab3e39741b10a67e33ab4a80f4ef633b68d28525f4732d7bbea3981fc45", None),  # noqa: E501
    ("a payout's IPN", PAYOUT, "67f8fb4483a95e45520d0549b51be348e583f5851d01bbd3b68fdea96527cb30831831c86d174406dbefeee663cbbc5192bda7684619916db5dc21d99466a691", None),  # noqa: E501
]  # fmt: skip


def verdict(body: bytes, header: str | None, secrets: tuple[str, ...] = (SECRET,)) -> str:
    """The verdict: ok, or the refusal's class."""
    try:
        SCHEME.verify(SchemeParams(secrets=secrets), {} if header is None else {HEADER: header},
                      body, 0)  # fmt: skip
    except (SignatureMissing, SignatureMalformed, SignatureMismatch) as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize(("case", "body", "sdk", "docs"), VECTORS, ids=[v[0] for v in VECTORS])
def test_what_nowpayments_code_signs_verifies_and_is_what_we_sign(
    case: str, body: bytes, sdk: str, docs: str | None
) -> None:
    """Both of NOWPayments' functions' signatures verify (upper case too), and signing
    gives the SDK's."""
    assert verdict(body, sdk) == verdict(body, sdk.upper()) == "ok"
    assert verdict(body, docs or sdk) == "ok"
    assert SCHEME.sign(PARAMS, body, 0) == {HEADER: sdk}


@pytest.mark.parametrize(
    ("body", "texts"),
    [
        (UNICODE, ['{"order_description":"caf\u00e9 \u20ac5 \U0001f600 a/b \u2028 \\"q\\" \\\\ \\n\\u001f\\ud800","payment_id":7,"payment_status":"waiting"}']),  # noqa: E501
        (NUMBERS, ['{"actually_paid":1.5,"outcome_amount":12345678901234567000,"pay_amount":1e-7,"payment_id":8,"payment_status":"confirming","price_amount":15}']),  # noqa: E501
        (ARRAY, ['{"payment_extra_ids":[{"a":1,"b":2},"x",[3]],"payment_id":9,"payment_status":"finished"}',  # noqa: E501
                 '{"payment_extra_ids":{"0":{"a":1,"b":2},"1":"x","2":{"0":3}},"payment_id":9,"payment_status":"finished"}']),
        (KEYS, ['{"9":3,"10":2,"4294967295":5,"B":7,"_":6,"a":4,"b":1,"payment_id":10,"payment_status":"sending"}']),  # noqa: E501
        ('{"k\U0001f600":1,"k\uffff":2,"__proto__":{"x":1}}'.encode(),  # by UTF-16 units; dropped
         ['{"k\U0001f600":1,"k\uffff":2}']),
        (b'{"a":[],"b":{},"c":[[]],"d":true,"e":null}',
         ['{"a":[],"b":{},"c":[[]],"d":true,"e":null}', '{"a":{},"b":{},"c":{"0":{}},"d":true,"e":null}']),  # noqa: E501
    ],
)  # fmt: skip
def test_the_signed_text_is_node_js_byte_for_byte(body: bytes, texts: list[str]) -> None:
    """The texts Node.js printed for `JSON.stringify(sortObjectDeep(JSON.parse(body)))`
    and, for an array, the documentation's `sortObject`."""
    forms = signed_forms(parse_body(body))
    assert [f.decode("utf-8", "surrogatepass") for f in forms] == texts


@pytest.mark.parametrize(
    ("text", "javascript"),
    [("1.50", "1.5"), ("1e-7", "1e-7"), ("1E-7", "1e-7"), ("0.0000001", "1e-7"),
     ("0.000001", "0.000001"), ("15.0", "15"), ("1e2", "100"), ("-0", "0"), ("0e10", "0"),
     ("1e20", "100000000000000000000"), ("1e21", "1e+21"), ("1.2345e+16", "12345000000000000"),
     ("123456789012345678901234", "1.2345678901234569e+23"),
     ("12345678901234567890", "12345678901234567000"), ("5e-324", "5e-324"),
     ("1.7976931348623157e308", "1.7976931348623157e+308"), ("1e400", "null"),
     ("0.09853637216235617", "0.09853637216235617"), ("-1.5e-10", "-1.5e-10"),
     ("123e-20", "1.23e-18"), ("100.25", "100.25")],
)  # fmt: skip
def test_numbers_are_written_as_javascript_writes_their_double(text: str, javascript: str) -> None:
    """`JSON.stringify(JSON.parse(text))` as Node.js printed it (6,000 random doubles
    and decimal texts were also compared with Node.js while this was written)."""
    assert js_number(text) == javascript


GOOD = SCHEME.sign(PARAMS, USDT, 0)[HEADER]
OTHER = SCHEME.sign(SchemeParams(secrets=("older_secret",)), USDT, 0)[HEADER]


@pytest.mark.parametrize(
    ("case", "body", "header", "secrets", "expected"),
    [
        ("the amount changed after signing", USDT.replace(b"100.25", b"1000.25"), GOOD, (SECRET,), "SignatureMismatch"),  # noqa: E501
        ("the status changed", USDT.replace(b'"finished"', b'"refunded"'), GOOD, (SECRET,), "SignatureMismatch"),  # noqa: E501
        ("another secret signed it", USDT, OTHER, (SECRET,), "SignatureMismatch"),
        ("during a rotation, the older secret", USDT, OTHER, (SECRET, "older_secret"), "ok"),
        ("both signatures in one header", USDT, f"{OTHER}, {GOOD}", (SECRET,), "ok"),
        ("the secret with blanks around it, trimmed as NOWPayments trims it", USDT, GOOD, (f" {SECRET}\n",), "ok"),  # noqa: E501
        ("respelt: blanks, key order, 100.250", b'{ "actually_paid" : 100.250, ' + USDT[1:].replace(b'"actually_paid":100.25,', b""), GOOD, (SECRET,), "ok"),  # noqa: E501
        ("no header", USDT, None, (SECRET,), "SignatureMissing"),
        ("a blank header", USDT, "  ", (SECRET,), "SignatureMissing"),
        ("not hex", USDT, "zz" * 64, (SECRET,), "SignatureMalformed"),
        ("a SHA-256's length", USDT, "ab" * 32, (SECRET,), "SignatureMalformed"),
        ("nine signatures", USDT, ",".join([GOOD] * 9), (SECRET,), "SignatureMalformed"),
        ("a body that is not JSON", b"payment_id=1", GOOD, (SECRET,), "SignatureMalformed"),
        ("NaN, which JSON.parse refuses", b'{"a":NaN}', GOOD, (SECRET,), "SignatureMalformed"),
        ("an array, not an object", b"[1]", GOOD, (SECRET,), "SignatureMalformed"),
        ("not UTF-8", b'{"a":"\xff"}', GOOD, (SECRET,), "SignatureMalformed"),
        ("a byte-order mark", b"\xef\xbb\xbf" + USDT, GOOD, (SECRET,), "SignatureMalformed"),
        ("nested past the limit", b'{"a":' * (DEPTH_MAX + 1) + b"1" + b"}" * (DEPTH_MAX + 1), GOOD, (SECRET,), "SignatureMalformed"),  # noqa: E501
        ("nested past Python's recursion", b"[" * 100_000 + b"]" * 100_000, GOOD, (SECRET,), "SignatureMalformed"),  # noqa: E501
    ],
)  # fmt: skip
def test_what_is_refused_and_what_verifies(
    case: str, body: bytes, header: str | None, secrets: tuple[str, ...], expected: str
) -> None:
    assert verdict(body, header, secrets) == expected


def test_a_respelt_body_is_one_notification() -> None:
    """The signature covers the text JavaScript writes, which `1.5` and `1.50` share:
    the digest of that text is recorded, so a respelt replay is a duplicate."""
    respelt = USDT.replace(b"100.25", b"100.250").replace(b'"finished"', b' "finished" ')
    assert verdict(respelt, GOOD) == "ok"
    assert not SCHEME.authenticates_id(PARAMS)
    signed_text = signed_forms(parse_body(USDT))[0]
    digest = SCHEME.replay_digest(PARAMS, {}, USDT)
    assert (
        digest == SCHEME.replay_digest(PARAMS, {}, respelt) == hashlib.sha256(signed_text).digest()
    )
    assert SCHEME.required_headers(PARAMS) == SCHEME.signature_headers(PARAMS) == (HEADER,)
    assert SCHEME.stored_headers(PARAMS) == ()


def test_signing_a_body_that_is_no_object_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        SCHEME.sign(PARAMS, b"[]", 0)


@pytest.mark.parametrize(
    ("body", "event_id", "event_type", "key"),
    [
        (USDT, "5077125051:finished", "finished", "5077125051"),
        (DOCS_EXAMPLE, "123456789:finished", "finished", "123456789"),
        (PAYOUT, "5077125051:5014082209:FINISHED", "FINISHED", None),
        (b'{"id":"1234567890","status":"FINISHED","currency":"trx","amount":"12.17"}',
         "1234567890:FINISHED", "FINISHED", None),
    ],
)  # fmt: skip
def test_each_status_change_is_its_own_event(
    body: bytes, event_id: str, event_type: str, key: str | None
) -> None:
    """A payment's IPN is `payment_id:payment_status`, ordered by its payment; a payout's
    and a custodial recurring payment's are theirs, not refused for lack of one."""
    shape = webhook_shaper("nowpayments", SCHEME.id_ref(PARAMS), SCHEME.type_ref(PARAMS),
                           order_rules=NOWPAYMENTS.order_keys, ordered=lambda _: True,
                           decode=NOWPAYMENTS.document)  # fmt: skip
    shaped = shape({}, body, datetime(2026, 12, 6, tzinfo=UTC), None)
    assert shaped.failure is None
    assert (shaped.event_id, shaped.event_type, shaped.order_key) == (event_id, event_type, key)
    assert shaped.subject == f"webhooks.nowpayments.{event_type}"
    assert shaped.body == body


# --- money ------------------------------------------------------------------------------


def ipn(status: str, **fields: Any) -> dict[str, Any]:
    """USDT's payment with another status and some fields replaced (None removes one),
    read as the provider reads it."""
    doc: dict[str, Any] = document(USDT)
    doc["payment_status"] = status
    for key, value in fields.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def test_the_registry_names_what_moves_money() -> None:
    assert PROVIDERS["nowpayments"] is NOWPAYMENTS and NOWPAYMENTS.title == "NOWPayments"
    assert movements_of("nowpayments") is NOWPAYMENTS.movements
    schemes = {"np": "nowpayments"}
    assert may_move_money("np", "finished", schemes) and may_move_money("np", "refunded", schemes)
    assert not may_move_money("np", "partially_paid", schemes)
    assert NOWPAYMENTS.cross_check and NOWPAYMENTS.refused_status == 401


@pytest.mark.parametrize(
    ("status", "fields", "kind", "amount", "currency"),
    [
        ("finished", {}, K.CAPTURE, 100_250_000, "USDT"),
        ("refunded", {}, K.REFUND, 100_250_000, "USDT"),
        ("finished", {"pay_currency": "usdterc20", "actually_paid": Decimal("0.000001")}, K.CAPTURE, 1, "USDT"),  # noqa: E501
        ("finished", {"pay_currency": "USDTBSC", "actually_paid": Decimal("12.5")}, K.CAPTURE, 12_500_000, "USDT"),  # noqa: E501
        ("finished", {"pay_currency": "usdtsol", "actually_paid": 7}, K.CAPTURE, 7_000_000, "USDT"),
        ("finished", {"pay_currency": "usdc", "actually_paid": Decimal("1E+1")}, K.CAPTURE, 10_000_000, "USDC"),  # noqa: E501
        ("finished", {"pay_currency": "usdcmatic", "actually_paid": "3.250000"}, K.CAPTURE, 3_250_000, "USDC"),  # noqa: E501
        ("finished", {"pay_currency": "eur", "actually_paid": Decimal("19.90")}, K.CAPTURE, 1990, "EUR"),  # noqa: E501
    ],
)  # fmt: skip
def test_finished_captures_and_refunded_refunds_the_crypto_received(
    status: str, fields: dict[str, Any], kind: SettlementKind, amount: int, currency: str
) -> None:
    """`actually_paid` in the asset `pay_currency` names on its network, exactly."""
    found = instruction(status, ipn(status, **fields))
    assert found is not None
    assert (found.kind, found.amount_minor, found.currency) == (kind, amount, currency)
    assert found.settlement_id == "5077125051" and found.merchant_id is None
    assert found.refund_id == (None if kind is K.CAPTURE else "5077125051")
    assert found.source_event_id == f"5077125051:{status}"


@pytest.mark.parametrize(
    "status",
    ["waiting", "confirming", "confirmed", "sending", "partially_paid", "failed", "expired"],
)
def test_the_other_statuses_move_nothing(status: str) -> None:
    """`partially_paid` too: the rest may come, and `finished` then tells the whole."""
    assert instruction(status, ipn(status)) is None


def test_a_payout_ipn_moves_nothing() -> None:
    assert instruction("finished", document(PAYOUT)) is None


@pytest.mark.parametrize(
    ("case", "fields", "error", "field"),
    [
        ("a seventh decimal of USDT", {"actually_paid": Decimal("10.0000005")}, FieldTypeInvalid, "actually_paid"),  # noqa: E501
        ("1e-7 USDT", {"actually_paid": Decimal("1E-7")}, FieldTypeInvalid, "actually_paid"),
        ("a text finer than its double", {"actually_paid": Decimal("0.30000000000000001")}, FieldTypeInvalid, "actually_paid"),  # noqa: E501
        ("an integer past the doubles", {"actually_paid": 10**400}, FieldTypeInvalid, "actually_paid"),  # noqa: E501
        ("a third decimal of EUR", {"pay_currency": "eur", "actually_paid": Decimal("1.005")}, FieldTypeInvalid, "actually_paid"),  # noqa: E501
        ("a string with a seventh decimal", {"actually_paid": "1.0000001"}, FieldTypeInvalid, "actually_paid"),  # noqa: E501
        ("nothing received", {"actually_paid": 0}, InvalidAmount, None),
        ("a negative amount", {"actually_paid": Decimal("-5")}, InvalidAmount, None),
        ("wider than the ledgers", {"actually_paid": Decimal("1E+25")}, InvalidAmount, None),
        ("a boolean", {"actually_paid": True}, FieldTypeInvalid, "actually_paid"),
        ("no amount", {"actually_paid": None}, MissingField, "actually_paid"),
        ("bitcoin, which the ledger holds no asset of", {"pay_currency": "btc"}, FieldTypeInvalid, "pay_currency"),  # noqa: E501
        ("Tron's own coin", {"pay_currency": "trx"}, FieldTypeInvalid, "pay_currency"),
        ("no pay_currency", {"pay_currency": None}, MissingField, "pay_currency"),
        ("an id past 2**53, which the signature cannot cover exactly", {"payment_id": 2**53}, FieldTypeInvalid, "payment_id"),  # noqa: E501
        ("an id that is a float", {"payment_id": Decimal("5.0")}, FieldTypeInvalid, "payment_id"),
    ],
)  # fmt: skip
def test_what_cannot_settle_exactly_is_refused_never_rounded(
    case: str, fields: dict[str, Any], error: type[Exception], field: str | None
) -> None:
    with pytest.raises(error) as info:
        instruction("finished", ipn("finished", **fields))
    if field is not None:
        assert isinstance(info.value, (FieldTypeInvalid, MissingField))
        assert info.value.field == field


def test_amounts_are_read_from_their_text() -> None:
    """`document` hands every decimal over as its text; 0.1 + 0.2 never happens."""
    doc = document(b'{"a":100.25,"b":0.1,"c":1e-6,"d":7}')
    assert doc == {"a": Decimal("100.25"), "b": Decimal("0.1"), "c": Decimal("1e-6"), "d": 7}
    assert [exact_amount(doc, k, "USDT") for k in "abcd"] == [100_250_000, 100_000, 1, 7_000_000]
    with pytest.raises(PayloadNotJson):
        document(b'{"a":NaN}')


def test_the_merchant_is_where_the_configuration_says() -> None:
    """NOWPayments names none: a capture without `[providers.NAME] merchant` is parked
    naming `merchant_id`; with it, the field it points at; a refund needs none."""
    body = orjson.dumps(orjson.loads(USDT))
    schemes = {"np": "nowpayments"}
    with pytest.raises(MissingField, match="merchant_id"):
        instruction_of("np", "finished", body, schemes)
    found = instruction_of("np", "finished", body, schemes, {"np": parse_rules(["/order_id"])})
    assert found is not None and found.merchant_id == "m_np_1"
    refund = instruction_of("np", "refunded", body, schemes)
    assert refund is not None and refund.merchant_id is None
