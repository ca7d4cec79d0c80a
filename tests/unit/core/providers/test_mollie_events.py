"""Mollie's next-gen webhooks: the `mollie_events` scheme held to Mollie's own validator,
the event read from bodies in the shape of Mollie's fixtures, and no money moved.

The reference is `mollie.utils.webhooks.SignatureValidator` of mollie-api-py (Mollie's
generated Python SDK, a development dependency), the same rule as mollie/mollie-api-php
`src/Webhooks/SignatureValidator.php`. The inputs are those of mollie-api-php's
`tests/Webhooks/SignatureValidatorTest.php`: its payload, its secret and its alternate
secret of a rotation. Every case runs through both verifiers; where they are meant to
differ (a case's `sdk` is not ours), the case says why.

The payloads (`payloads/mollie_events/README.md`) are written for these tests in the
shape of mollie-api-php's `tests/Fixtures/Webhooks/payloads/payment-link-paid.*.json`.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from mollie.models import EntityWebhookEvent
from mollie.utils.webhooks import InvalidSignatureException, SignatureValidator

from gateway.core.events.shaper import webhook_shaper
from gateway.core.providers import get_provider
from gateway.core.providers.movements import movements_of, settling_schemes
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.mollie.events import (
    HEADER,
    HEADER_CHARS_MAX,
    SCHEME,
    SIGNATURES_MAX,
)
from gateway.errors import SignatureMalformed, SignatureMismatch, SignatureMissing

#: mollie-api-php `tests/Webhooks/SignatureValidatorTest.php`'s inputs.
PAYLOAD = b'{"id":"tr_12345","event_type":"payment-link.paid"}'
SECRET = "test_webhook_secret"
ALTERNATE = "alternate_webhook_secret"
PAYLOADS = Path(__file__).parent / "payloads" / "mollie_events"
PROVIDER = get_provider("mollie_events")
_NOW = datetime(2026, 12, 6, tzinfo=UTC)


def hexmac(secret: str, body: bytes = PAYLOAD) -> str:
    """The hex HMAC-SHA256 of body, written here from the rule (the standard library)."""
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def ours(body: bytes, signatures: list[str] | None, secrets: tuple[str, ...]) -> str:
    """Our verdict: "ok" or the refusal's class; several signatures go in one header
    joined with ", ", as a proxy joins a repeated header."""
    headers = {} if signatures is None else {HEADER: ", ".join(signatures)}
    try:
        SCHEME.verify(SchemeParams(secrets=secrets), headers, body, 0)
    except (SignatureMissing, SignatureMalformed, SignatureMismatch) as exc:
        return type(exc).__name__
    return "ok"


def theirs(body: bytes, signatures: list[str] | None, secrets: tuple[str, ...]) -> bool:
    """Mollie's verdict: True for a valid signature; False for none (to Mollie's SDK a
    classic webhook) or an invalid one (`InvalidSignatureException`)."""
    try:
        return SignatureValidator.validate(body.decode("utf-8"), list(secrets), signatures)
    except InvalidSignatureException:
        return False


GOOD = hexmac(SECRET)
OLD = hexmac(ALTERNATE)
NON_ASCII = '{"id":"event_x","type":"payment-link.paid","d":"caf\u00e9 \u20ac"}'.encode()
OK, MISSING = "ok", "SignatureMissing"
MALFORMED, MISMATCH = "SignatureMalformed", "SignatureMismatch"


@pytest.mark.parametrize(
    ("case", "body", "signatures", "secrets", "expected", "sdk"),
    [
        ("genuine, sha256= prefix", PAYLOAD, ["sha256=" + GOOD], (SECRET,), OK, True),
        ("genuine, bare hex (the SDKs strip a prefix if present)", PAYLOAD, [GOOD],
         (SECRET,), OK, True),
        ("genuine, a non-ASCII body", NON_ASCII, ["sha256=" + hexmac(SECRET, NON_ASCII)],
         (SECRET,), OK, True),
        ("a byte changed after signing", PAYLOAD.replace(b"12345", b"12346"),
         ["sha256=" + GOOD], (SECRET,), MISMATCH, False),
        ("a byte appended after signing", PAYLOAD + b"\n", ["sha256=" + GOOD], (SECRET,),
         MISMATCH, False),
        ("another secret", PAYLOAD, ["sha256=" + OLD], (SECRET,), MISMATCH, False),
        ("rotation: the older of two secrets signed", PAYLOAD, ["sha256=" + OLD],
         (SECRET, ALTERNATE), OK, True),
        ("rotation: one secret among three (the PHP test's)", PAYLOAD, [GOOD],
         ("invalid_secret", SECRET, "another_invalid_secret"), OK, True),
        ("rotation: two signatures, the new secret configured", PAYLOAD,
         ["sha256=" + OLD, "sha256=" + GOOD], (SECRET,), OK, True),
        ("rotation: two signatures, the old secret configured", PAYLOAD,
         ["sha256=" + OLD, "sha256=" + GOOD], (ALTERNATE,), OK, True),
        ("rotation: two signatures, both secrets configured", PAYLOAD,
         ["sha256=" + OLD, "sha256=" + GOOD], (SECRET, ALTERNATE), OK, True),
        ("two signatures, neither of a configured secret", PAYLOAD,
         ["sha256=" + OLD, "sha256=" + GOOD], ("other",), MISMATCH, False),
        ("no header: refused here; a classic webhook to the SDK", PAYLOAD, None, (SECRET,),
         MISSING, False),
        ("a blank header", PAYLOAD, ["  "], (SECRET,), MISSING, False),
        ("not hex", PAYLOAD, ["sha256=" + "zz" * 32], (SECRET,), MALFORMED, False),
        ("the PHP test's 'invalid_signature'", PAYLOAD, ["invalid_signature"], (SECRET,),
         MALFORMED, False),
        ("31 bytes", PAYLOAD, ["sha256=" + GOOD[:62]], (SECRET,), MALFORMED, False),
        ("33 bytes", PAYLOAD, ["sha256=" + GOOD + "00"], (SECRET,), MALFORMED, False),
        ("an HMAC-SHA512", PAYLOAD,
         ["sha256=" + hmac.new(SECRET.encode(), PAYLOAD, hashlib.sha512).hexdigest()],
         (SECRET,), MALFORMED, False),
        ("the prefix twice", PAYLOAD, ["sha256=sha256=" + GOOD], (SECRET,), MALFORMED, False),
        ("another algorithm's label", PAYLOAD, ["sha512=" + GOOD], (SECRET,), MALFORMED,
         False),
        ("the prefix in capitals", PAYLOAD, ["SHA256=" + GOOD], (SECRET,), MALFORMED, False),
        ("a huge header, one value", PAYLOAD, ["sha256=" + GOOD + "0" * 100_000], (SECRET,),
         MALFORMED, False),
        # Differences by design: the SDK takes any number of values; we refuse more than
        # Mollie would ever send before computing any HMAC.
        ("more signatures than SIGNATURES_MAX, one genuine", PAYLOAD,
         ["sha256=" + "ab" * 32] * SIGNATURES_MAX + ["sha256=" + GOOD], (SECRET,),
         MALFORMED, True),
        # The SDK compares hex text; we compare the decoded bytes, as every hex scheme of
        # the gateway does: the same, genuine, signature in capitals.
        ("upper-case hex of the genuine signature", PAYLOAD, ["sha256=" + GOOD.upper()],
         (SECRET,), OK, False),
    ],
)  # fmt: skip
def test_we_refuse_what_mollies_validator_refuses(
    case: str,
    body: bytes,
    signatures: list[str] | None,
    secrets: tuple[str, ...],
    expected: str,
    sdk: bool,
) -> None:
    """Every case through both verifiers; `sdk` is mollie-api-py's verdict."""
    assert ours(body, signatures, secrets) == expected, case
    assert theirs(body, signatures, secrets) is sdk, case


def test_the_reference_signs_as_the_rule_says() -> None:
    """The SDK's `create_signature`, the rule written out, and our `sign` agree."""
    assert SignatureValidator.create_signature(PAYLOAD.decode(), SECRET) == GOOD
    signed = SCHEME.sign(SchemeParams(secrets=(SECRET, ALTERNATE)), PAYLOAD, 0)
    assert signed == {"X-Mollie-Signature": "sha256=" + GOOD}


@pytest.mark.parametrize(
    ("case", "header", "expected"),
    [
        ("comma and space, as a proxy joins", f"sha256={OLD}, sha256={GOOD}", OK),
        ("comma alone", f"sha256={OLD},sha256={GOOD}", OK),
        ("spaces alone", f"sha256={OLD} sha256={GOOD}", OK),
        ("a prefixed and a bare one", f"{OLD}, sha256={GOOD}", OK),
        ("a trailing comma", f"sha256={GOOD},", OK),
        ("separators only", " , , ", MALFORMED),
        ("a bad one beside a genuine one", f"sha256={'zz' * 32}, sha256={GOOD}", MALFORMED),
        ("SIGNATURES_MAX, the genuine last", ", ".join([f"sha256={OLD}"] * 7 + [GOOD]), OK),
        ("one character over HEADER_CHARS_MAX", "a" * (HEADER_CHARS_MAX + 1), MALFORMED),
    ],
)
def test_one_header_may_carry_several_signatures(case: str, header: str, expected: str) -> None:
    """A repeated header reaches the gateway joined (RFC 9110 5.3): any of its values
    may be the genuine one; a value that is not a signature refuses the request."""
    try:
        SCHEME.verify(SchemeParams(secrets=(SECRET,)), {HEADER: header}, PAYLOAD, 0)
        found = OK
    except (SignatureMalformed, SignatureMismatch) as exc:
        found = type(exc).__name__
    assert found == expected, case


def test_the_scheme_reads_a_signed_id_and_keeps_no_signature() -> None:
    """The id is the signed body's, so a replay is a duplicate by id: no body digest."""
    params = SchemeParams(secrets=(SECRET,))
    assert SCHEME.authenticates_id(params)
    assert SCHEME.replay_digest(params, {}, PAYLOAD) is None
    assert SCHEME.required_headers(params) == SCHEME.signature_headers(params) == (HEADER,)
    assert SCHEME.stored_headers(params) == ()


@pytest.mark.parametrize("name", ["payment_link_paid_full", "payment_link_paid_simple"])
def test_an_event_is_shaped_under_its_id_type_and_entity(name: str) -> None:
    """The shaper the gateway uses reads what Mollie's SDK model reads: the id, the type
    and, as the order key, the entity; the body is kept byte for byte."""
    body = (PAYLOADS / f"{name}.json").read_bytes()
    model = EntityWebhookEvent.model_validate(orjson.loads(body))
    params = SchemeParams(secrets=(SECRET,))
    shape = webhook_shaper(
        "mollie_events",
        SCHEME.id_ref(params),
        SCHEME.type_ref(params),
        order_rules=PROVIDER.order_keys,
        ordered=lambda subject: True,
    )
    shaped = shape({}, body, _NOW, None)
    assert shaped.failure is None
    assert (shaped.event_id, shaped.event_type) == (model.id, model.webhook_event_types.value)
    assert shaped.event_id == "event_Hq4Tz7RbW2xLm9Vc5KdNp"
    assert shaped.subject == "webhooks.mollie_events.payment-link.paid"
    assert shaped.order_key == model.entity_id == "pl_Rk8Yd3NwQ6tGh2Bv7XcJm"
    assert shaped.body == body


def test_no_event_moves_money() -> None:
    """Mollie's payments settle through the classic `mollie` provider's confirm stage;
    settling `payment-link.paid` here as well would move that money twice."""
    assert PROVIDER.movements is None
    assert movements_of("mollie_events") is None
    assert "mollie_events" not in settling_schemes()
    assert PROVIDER.confirmation is None and PROVIDER.batch is None
    assert PROVIDER.refused_status == 401
