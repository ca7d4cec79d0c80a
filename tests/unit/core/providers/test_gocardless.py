"""GoCardless: the `gocardless` scheme held to GoCardless's own library and its published
vector, the split of a request into one body per event, and each event's id, type and
bounds, table-driven.

The vector is gocardless/gocardless-pro-python's `tests/fixtures/webhook_body.json`
(MIT; commit bf13ea7d), kept byte for byte in `vectors/gocardless_webhook_body.json`.
That repository's `tests/webhooks_test.py` reads it `.strip()`ped and signs it with the
key `ED7D658C-D8EB-4941-948B-3973214F2D49` as `2693754819…6e7e`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from gocardless_pro import webhooks  # type: ignore[import-untyped]  # dev lock only
from gocardless_pro.errors import InvalidSignatureError  # type: ignore[import-untyped]

from gateway.core.events.model import webhook_event
from gateway.core.events.shaper import webhook_shaper
from gateway.core.providers import get_provider
from gateway.core.providers.gocardless.answer import AWAITED
from gateway.core.providers.gocardless.webhooks import ITEM_BYTES_MAX, ITEMS_MAX
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.gocardless import SCHEME, split
from gateway.errors import (
    BatchTooLarge,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)

VECTOR = (Path(__file__).parent / "vectors" / "gocardless_webhook_body.json").read_bytes()
VECTOR_KEY = "ED7D658C-D8EB-4941-948B-3973214F2D49"
VECTOR_SIG = "2693754819d3e32d7e8fcb13c729631f316c6de8dc1cf634d6527f1c07276e7e"
PROVIDER = get_provider("gocardless")
PARAMS = SchemeParams(secrets=("gc_secret",))
_NOW = datetime(2026, 12, 6, tzinfo=UTC)


def signature(body: bytes, secret: str) -> str:
    return SCHEME.sign(SchemeParams(secrets=(secret,)), body, 0)["Webhook-Signature"]


def ours(body: bytes, sig: str, *secrets: str) -> bool:
    try:
        SCHEME.verify(SchemeParams(secrets=secrets), {"webhook-signature": sig}, body, 0)
    except (SignatureMismatch, SignatureMalformed):
        return False
    return True


def theirs(body: bytes, sig: str, *secrets: str) -> bool:
    """GoCardless's library, tried with each configured secret (it takes one)."""
    for secret in secrets:
        try:
            webhooks.parse(body, secret, sig)
        except InvalidSignatureError:
            continue
        return True
    return False


def event(n: int, resource: str = "payments", action: str = "confirmed") -> dict[str, Any]:
    return {"id": f"EV{n:012d}", "created_at": "2026-12-06T10:00:00.000Z",
            "resource_type": resource, "action": action,
            "links": {"payment": f"PM{n:012d}"},
            "details": {"origin": "gocardless", "cause": "payment_confirmed",
                        "description": "Enough time has passed since the payment was "
                                       "submitted for the banks to return an error."},
            "metadata": {}}  # fmt: skip


def request(*events: dict[str, Any], meta: bool = True, indent: bool = False) -> bytes:
    doc: dict[str, Any] = {"events": list(events)}
    if meta:
        doc["meta"] = {"webhook_id": "WB000123"}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0)


# --- verification ---------------------------------------------------------------------


def test_the_published_vector_verifies_stripped_as_the_library_reads_it() -> None:
    """The library's test strips the fixture; its trailing newline is not signed."""
    body = VECTOR.strip()
    assert VECTOR.endswith(b"}\n")
    assert ours(body, VECTOR_SIG, VECTOR_KEY) and theirs(body, VECTOR_SIG, VECTOR_KEY)
    assert [e.id for e in webhooks.parse(body, VECTOR_KEY, VECTOR_SIG)] == [
        "EV00BD05S5VM2T",
        "EV00BD05TB8K63",
    ]
    assert not ours(VECTOR, VECTOR_SIG, VECTOR_KEY)
    assert not theirs(VECTOR, VECTOR_SIG, VECTOR_KEY)


_BODY = request(event(1), event(2))
_TAMPERED = _BODY.replace(b"EV000000000002", b"EV000000000003")


@pytest.mark.parametrize(
    ("case", "body", "signed_with", "secrets", "accepted"),
    [
        ("valid", _BODY, "gc_a", ("gc_a",), True),
        ("one byte changed after signing", _TAMPERED, "gc_a", ("gc_a",), False),
        ("a byte appended after signing", _BODY + b" ", "gc_a", ("gc_a",), False),
        ("another secret", _BODY, "gc_other", ("gc_a",), False),
        ("rotation: signed with the new of two", _BODY, "gc_new", ("gc_old", "gc_new"), True),
        ("rotation: signed with the old of two", _BODY, "gc_old", ("gc_old", "gc_new"), True),
        ("rotation: neither", _BODY, "gc_gone", ("gc_old", "gc_new"), False),
        ("non-ASCII secret as UTF-8", _BODY, "clé", ("clé",), True),
    ],
)
def test_we_accept_exactly_what_gocardless_pro_accepts(
    case: str, body: bytes, signed_with: str, secrets: tuple[str, ...], accepted: bool
) -> None:
    """One table, both verifiers; the signature is always over `_BODY` as sent."""
    sig = signature(_BODY, signed_with)
    assert ours(body, sig, *secrets) is accepted, case
    assert theirs(body, sig, *secrets) is accepted, case


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({}, SignatureMissing),
        ({"webhook-signature": "  "}, SignatureMissing),
        ({"webhook-signature": "zz" * 32}, SignatureMalformed),
        ({"webhook-signature": "ab" * 31}, SignatureMalformed),  # 31 bytes, not 32
        ({"webhook-signature": "sha256=" + "ab" * 32}, SignatureMalformed),
        # A list is not what GoCardless sends; the library compares the one value too.
        ({"webhook-signature": f"{'ab' * 32},{'cd' * 32}"}, SignatureMalformed),
        ({"webhook-signature": "ab" * 32}, SignatureMismatch),
    ],
)
def test_each_bad_header_is_refused_with_its_class(
    headers: dict[str, str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        SCHEME.verify(PARAMS, headers, _BODY, 0)


def test_upper_case_hex_is_the_one_reading_the_library_does_not_share() -> None:
    """GoCardless writes lower case (`hexdigest`); we compare decoded bytes, as every
    hex scheme here does, so the same signature in upper case is accepted by us and
    refused by the library's string comparison. Nothing forged gets through: the bytes
    are the genuine signature's."""
    sig = signature(_BODY, "gc_a").upper()
    assert ours(_BODY, sig, "gc_a") and not theirs(_BODY, sig, "gc_a")


def test_the_scheme_reads_its_id_from_the_signed_body_and_keeps_no_header() -> None:
    assert SCHEME.authenticates_id(PARAMS) and SCHEME.replay_digest(PARAMS, {}, _BODY) is None
    assert SCHEME.required_headers(PARAMS) == SCHEME.signature_headers(PARAMS)
    assert SCHEME.stored_headers(PARAMS) == ()


def test_the_provider_declares_a_whole_signed_batch_answered_498_and_an_optional_fetch() -> None:
    """Its events carry no amount: those that move money are confirmed by a fetch when an
    API key is configured (`optional`), and keep their type when confirmed."""
    assert PROVIDER.batch is not None and PROVIDER.batch.signed_whole
    assert (PROVIDER.batch.items_max, PROVIDER.batch.item_bytes_max) == (ITEMS_MAX, ITEM_BYTES_MAX)
    assert PROVIDER.refused_status == 498
    confirmation = PROVIDER.confirmation
    assert confirmation is not None and confirmation.optional and confirmation.keeps_types
    assert PROVIDER.movements is not None
    assert set(PROVIDER.movements.types) == {t for t in AWAITED if confirmation.owed(t)}


# --- the split ------------------------------------------------------------------------

_TRICKY = {**event(7), "details": {"description": 'a "quoted" ], {braces}, and: colons\\',
                                   "cause": "caf\u00e9 \u2603", "origin": "api"},
           "metadata": {"k": ["[", "]", ",", "{"], "n": 1.50, "z": None, "t": True}}  # fmt: skip
_ESCAPED = (b'{"meta":{"webhook_id":"WB1"},  "\\u0065vents" : [ {"id":"EV1","resource_type":'
            b'"payments","action":"paid_out","x":"\\u005d\\""} ,\n{"id":"EV2",'
            b'"resource_type":"refunds","action":"created"}\t] }')  # fmt: skip


@pytest.mark.parametrize(
    ("case", "body"),
    [
        ("compact", request(event(1), event(2), event(3))),
        ("indented", request(event(1), event(2), indent=True)),
        ("no meta", request(event(1), event(2), meta=False)),
        ("strings holding brackets, commas, quotes and escapes", request(_TRICKY, event(8))),
        ("an escaped key, meta first, odd blanks", _ESCAPED),
    ],
)
def test_each_event_keeps_its_own_bytes_beside_the_requests_meta(case: str, body: bytes) -> None:
    """Every body of the split is the request's event, cut out byte for byte, and its
    `meta`: `{"events":[EVENT],"meta":META}`, read as the request reads."""
    doc = orjson.loads(body)
    bodies = split(body, ITEMS_MAX, ITEM_BYTES_MAX)
    assert len(bodies) == len(doc["events"]), case
    for one, expected in zip(bodies, doc["events"], strict=True):
        parsed = orjson.loads(one)
        assert parsed["events"] == [expected], case
        assert parsed.get("meta") == doc.get("meta"), case
        inner = one.removeprefix(b'{"events":[').rsplit(b"]", 1)[0]
        if "meta" in doc:
            inner = one.removeprefix(b'{"events":[').rsplit(b'],"meta":', 1)[0]
        assert inner in body, f"{case}: the event's bytes are not the request's"


@pytest.mark.parametrize(
    ("case", "body"),
    [
        ("one event: as it came", request(event(1), indent=True)),
        ("not JSON", b"events=1"),
        ("not an object", b"[1, 2]"),
        ("no events", b'{"meta": {}}'),
        ("events not a list", b'{"events": {"id": "EV1"}}'),
        ("no event at all", b'{"events": []}'),
    ],
)
def test_a_body_of_one_event_or_not_of_its_shape_comes_back_whole(case: str, body: bytes) -> None:
    assert split(body, ITEMS_MAX, ITEM_BYTES_MAX) == (body,), case


def test_the_library_reads_each_split_body_as_the_event_it_came_in() -> None:
    """A row's body is a request of one event: `gocardless_pro` reads it so."""
    body = VECTOR.strip()
    for one, expected_id in zip(split(body, 2, 4096), ("EV00BD05S5VM2T", "EV00BD05TB8K63"),
                                strict=True):  # fmt: skip
        (parsed,) = webhooks.parse(one, "k", signature(one, "k"))
        assert parsed.id == expected_id


@pytest.mark.parametrize(
    ("case", "count", "items_max", "item_bytes_max", "refused"),
    [
        ("at the item bound", 3, 3, 4096, False),
        ("one over the item bound", 4, 3, 4096, True),
        ("an event over the byte bound", 2, 10, 200, True),
        ("the provider's own bounds", ITEMS_MAX, ITEMS_MAX, ITEM_BYTES_MAX, False),
        ("one over the provider's", ITEMS_MAX + 1, ITEMS_MAX, ITEM_BYTES_MAX, True),
    ],
)
def test_bounds(case: str, count: int, items_max: int, item_bytes_max: int, refused: bool) -> None:
    body = request(*(event(n) for n in range(count)))
    if refused:
        with pytest.raises(BatchTooLarge):
            split(body, items_max, item_bytes_max)
    else:
        assert len(split(body, items_max, item_bytes_max)) == count, case


# --- ids and types --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "action", "event_type"),
    [
        ("payments", "confirmed", "payments.confirmed"),
        ("payments", "charged_back", "payments.charged_back"),
        ("refunds", "refund_settled", "refunds.refund_settled"),
        ("payouts", "paid", "payouts.paid"),
        ("billing_requests", "fulfilled", "billing_requests.fulfilled"),
    ],
)
def test_each_event_is_shaped_under_its_own_id_and_joined_type(
    resource: str, action: str, event_type: str
) -> None:
    """The shaper the gateway uses, on a split body."""
    shape = webhook_shaper("gocardless", SCHEME.id_ref(PARAMS), SCHEME.type_ref(PARAMS))
    body = split(request(event(1), event(2, resource, action)), 10, 4096)[1]
    shaped = shape({}, body, _NOW, None)
    assert (shaped.event_id, shaped.event_type) == ("EV000000000002", event_type)
    assert shaped.subject == f"webhooks.gocardless.{event_type}"
    assert shaped.body == body


def test_an_event_without_an_id_or_an_action_is_kept_and_parked_not_refused() -> None:
    """Verified content is never refused (`model.webhook_event`): no id, it is kept
    under its body's digest; no action, it has no type; either way it is parked."""
    ids, types = SCHEME.id_ref(PARAMS), SCHEME.type_ref(PARAMS)
    assert "joined by '.'" in types.where
    no_id = request({k: v for k, v in event(1).items() if k != "id"})
    shaped = webhook_event("gocardless", ids, types, {}, no_id, _NOW)
    assert shaped.event_id.startswith("sha256:") and shaped.failure is not None
    no_action = request({k: v for k, v in event(1).items() if k != "action"})
    assert types.read({}, orjson.loads(no_action)) is None
    shaped = webhook_event("gocardless", ids, types, {}, no_action, _NOW)
    assert shaped.event_id == "EV000000000001" and shaped.event_type is None
    assert shaped.failure is not None and shaped.subject is None
