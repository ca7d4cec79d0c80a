"""The generic `hmac` scheme's choices: the hash, the key's encoding, the signed content
and JSON pointers for the id and type. Every expected signature is computed here with
the standard library's `hmac` from the rule as written (RFC 2104), not by the scheme."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import replace

import orjson
import pytest

from gateway.core.events.model import ParsedBody, lookup
from gateway.core.providers import get_scheme
from gateway.core.signatures import (
    Algorithm,
    Encoding,
    FieldRef,
    KeyEncoding,
    SchemeParams,
    SignedContent,
    check_hmac_params,
)
from gateway.errors import SignatureMalformed, SignatureMismatch, SignatureMissing

SCHEME = get_scheme("hmac")
BODY = b'{"data": {"id": "evt_9", "kind": "paid"}}'
NOW = 1_760_000_000
URL = "https://gateway.example/webhooks/acme"
BASE = SchemeParams(
    secrets=("s3cret",),
    header="x-sig",
    event_id_from=FieldRef.parse("json:/data/id"),
    event_type_from=FieldRef.parse("json:/data/kind"),
)


def mac(key: bytes, message: bytes, algorithm: str) -> bytes:
    return hmac.new(key, message, getattr(hashlib, algorithm)).digest()


# (id, params changes, key bytes, message, how the header is written)
CASES = [
    ("sha1 hex text-key body", {"algorithm": Algorithm.SHA1}, b"s3cret", BODY, "hex"),
    ("sha256 hex text-key body", {}, b"s3cret", BODY, "hex"),
    ("sha512 hex (Paystack's shape)", {"algorithm": Algorithm.SHA512}, b"s3cret", BODY, "hex"),
    (
        "sha256 base64 url+body (Square's shape)",
        {"encoding": Encoding.BASE64, "signed": SignedContent.URL_BODY, "url": URL},
        b"s3cret",
        URL.encode() + BODY,
        "base64",
    ),
    (
        "hex key",
        {"secrets": ("00ff10ab",), "key_encoding": KeyEncoding.HEX},
        bytes.fromhex("00ff10ab"),
        BODY,
        "hex",
    ),
    (
        "base64 key",
        {"secrets": ("c2VjcmV0LWJ5dGVz",), "key_encoding": KeyEncoding.BASE64},
        b"secret-bytes",
        BODY,
        "hex",
    ),
]


def write(raw: bytes, how: str) -> str:
    return raw.hex() if how == "hex" else base64.b64encode(raw).decode()


@pytest.mark.parametrize(("changes", "key", "message", "how"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_the_scheme_verifies_and_signs_what_the_rule_says(
    changes: dict[str, object], key: bytes, message: bytes, how: str
) -> None:
    params = replace(BASE, **changes)  # type: ignore[arg-type]
    algorithm = params.algorithm.value
    expected = write(mac(key, message, algorithm), how)
    SCHEME.verify(params, {"x-sig": expected}, BODY, NOW)
    assert SCHEME.sign(params, BODY, NOW) == {"x-sig": expected}
    tampered = write(mac(key, message + b" ", algorithm), how)
    with pytest.raises(SignatureMismatch):
        SCHEME.verify(params, {"x-sig": tampered}, BODY, NOW)


def test_a_signature_of_another_hash_is_malformed_not_a_mismatch() -> None:
    """A SHA-256 signature offered to a SHA-512 provider has the wrong length."""
    params = replace(BASE, algorithm=Algorithm.SHA512)
    with pytest.raises(SignatureMalformed, match="expected 64"):
        SCHEME.verify(params, {"x-sig": mac(b"s3cret", BODY, "sha256").hex()}, BODY, NOW)


def test_url_body_signs_the_configured_url_not_another() -> None:
    """The URL signed is the one configured: a provider that signed another URL (the
    one a proxy rewrote to) does not verify."""
    params = replace(BASE, signed=SignedContent.URL_BODY, url=URL)
    other = mac(b"s3cret", b"http://internal:8080/webhooks/acme" + BODY, "sha256").hex()
    with pytest.raises(SignatureMismatch):
        SCHEME.verify(params, {"x-sig": other}, BODY, NOW)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"signed": SignedContent.URL_BODY}, "needs the notification_url"),
        ({"signed": SignedContent.TIMESTAMP_BODY}, "needs a timestamp_header"),
        ({"key_encoding": KeyEncoding.HEX}, "not valid hex"),
        ({"key_encoding": KeyEncoding.BASE64, "secrets": ("%%%",)}, "not valid base64"),
    ],
)
def test_settings_that_cannot_work_are_refused_at_start_up(
    changes: dict[str, object], problem: str
) -> None:
    params = replace(BASE, **changes)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=problem) as caught:
        check_hmac_params(params)
    assert "s3cret" not in str(caught.value)


def test_the_timestamped_default_is_kept_for_existing_settings() -> None:
    """A timestamp header without `signed` still signs `{ts}.{body}`."""
    params = replace(BASE, timestamp_header="x-ts")
    expected = mac(b"s3cret", f"{NOW}.".encode() + BODY, "sha256").hex()
    SCHEME.verify(params, {"x-sig": expected, "x-ts": str(NOW)}, BODY, NOW)
    with pytest.raises(SignatureMissing):
        SCHEME.verify(params, {"x-sig": expected}, BODY, NOW)


@pytest.mark.parametrize(
    ("ref", "doc", "found"),
    [
        ("json:id", {"id": "a"}, "a"),
        ("json:/data/id", {"data": {"id": "b"}}, "b"),
        ("json:/items/1/id", {"items": [{"id": "x"}, {"id": 7}]}, "7"),
        ("json:/a~1b/c~0d", {"a/b": {"c~d": "e"}}, "e"),
        ("json:/data/id", {"data": ["not", "an", "object"]}, None),
        ("json:/items/01", {"items": ["a", "b"]}, None),
        ("json:/missing", {"data": 1}, None),
    ],
)
def test_json_pointers_find_the_id_anywhere_in_the_body(
    ref: str, doc: object, found: str | None
) -> None:
    assert lookup(FieldRef.parse(ref), {}, ParsedBody(orjson.dumps(doc))) == found


def test_joined_refs_need_every_part() -> None:
    """Adyen's id is three fields joined; one absent makes the whole absent."""
    ref = FieldRef("json", "/a", also=("/b", "/c"))
    assert lookup(ref, {}, ParsedBody(b'{"a": "x", "b": 2, "c": "true"}')) == "x:2:true"
    assert lookup(ref, {}, ParsedBody(b'{"a": "x", "c": "true"}')) is None
    assert ref.where == "fields /a:/b:/c"


@pytest.mark.parametrize("text", ["json:/a/~2", "json:data/id/", "body:id", "json:"])
def test_a_bad_reference_is_a_value_error(text: str) -> None:
    if text == "json:data/id/":  # a top-level field with a slash in its name is allowed
        assert FieldRef.parse(text).name == "data/id/"
        return
    with pytest.raises(ValueError):
        FieldRef.parse(text)


def test_a_fallback_is_read_only_when_the_first_finds_nothing() -> None:
    """Paystack's id: `event:data.id`, else `event:data.refund_reference`."""
    refund_ref = FieldRef("json", "/event", also=("/data/refund_reference",))
    ref = FieldRef("json", "/event", also=("/data/id",), fallback=refund_ref)
    charge = b'{"event": "charge.success", "data": {"id": 7, "refund_reference": "no"}}'
    refund = b'{"event": "refund.processed", "data": {"refund_reference": "rf_1"}}'
    assert lookup(ref, {}, ParsedBody(charge)) == "charge.success:7"
    assert lookup(ref, {}, ParsedBody(refund)) == "refund.processed:rf_1"
    assert lookup(ref, {}, ParsedBody(b'{"event": "x", "data": {}}')) is None
    assert ref.where == "fields /event:/data/id, else fields /event:/data/refund_reference"


@pytest.mark.parametrize(
    ("encoding", "secret"), [(KeyEncoding.HEX, "  "), (KeyEncoding.BASE64, "")]
)
def test_a_secret_that_decodes_to_no_key_is_refused(encoding: KeyEncoding, secret: str) -> None:
    """An empty HMAC key is one anybody can sign with."""
    params = replace(BASE, secrets=(secret,), key_encoding=encoding)
    with pytest.raises(ValueError, match="no key at all"):
        check_hmac_params(params)
