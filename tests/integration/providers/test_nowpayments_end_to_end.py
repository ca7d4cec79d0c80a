"""NOWPayments' IPNs end to end: posted to a real gateway on PostgreSQL and NATS
JetStream, signed as NOWPayments' SDK signs them (the USDT payment's signature is the
one its Node.js code made, `tests/unit/core/providers/test_nowpayments.py`; the others
are signed here by the rule, with the standard library's JSON).

A body changed after signing, an unsigned request and a header that is not a signature
are refused with `401` and store nothing; the genuine IPN is recorded byte for byte under
`payment_id:payment_status` and published once; the same IPN again is a `duplicate`;
its next status is an event of its own; one signed with the older secret of a rotation
is accepted; and a respelt replay (an id past 2**53 written otherwise, the same signed
text) is a `duplicate` by the digest of that text, whatever id it claims.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import fetch
from tests.unit.core.providers.test_nowpayments import SECRET, USDT, VECTORS

OLDER = "np_ipn_secret_older_Jw6Tc2"
#: The signature NOWPayments' SDK made of `USDT` with `SECRET`.
USDT_SIGNATURE = next(v[2] for v in VECTORS if v[1] == USDT)
USDT_ID = "5077125051:finished"


@pytest.fixture
def doc(database_url: str, nats_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url)
    found["providers"]["nowpayments"] = {"scheme": "nowpayments", "secrets": [SECRET, OLDER]}
    return found


def signature(body: bytes, secret: str = SECRET) -> str:
    """NOWPayments' rule for a body of plain numbers: the keys sorted, no blanks,
    non-ASCII as it is (what Node.js's `JSON.stringify` writes of these bodies)."""
    text = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(secret.encode(), text.encode(), hashlib.sha512).hexdigest()


def ipn(payment_id: int | str, status: str, paid: str = "100.25") -> bytes:
    """An IPN as NOWPayments writes one (`JSON.stringify`: no blanks, its own key order)."""
    return (
        f'{{"payment_id":{payment_id},"payment_status":"{status}","pay_address":"TNDFki",'
        f'"price_amount":100,"price_currency":"usd","pay_amount":{paid},'
        f'"actually_paid":{paid},"pay_currency":"usdttrc20","order_id":"m_np_e2e",'
        f'"order_description":"caf\u00e9 / plan","updated_at":"2026-12-06T10:04:13.000Z"}}'
    ).encode()


def signed(value: str) -> dict[str, str]:
    return {"x-nowpayments-sig": value, "Content-Type": "application/json"}


async def post(server: RunningServer, body: bytes, headers: dict[str, str]) -> Any:
    return await server.client.post("/webhooks/nowpayments", content=body, headers=headers)


async def rows(dsn: str) -> list[Any]:
    return await fetch(
        dsn,
        "SELECT event_id, event_type, subject, body FROM processed_webhooks"
        " WHERE provider = 'nowpayments' ORDER BY event_id",
    )


async def test_signed_ipns_are_recorded_once_published_and_a_tampered_one_is_refused(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    assert signature(USDT) == USDT_SIGNATURE  # the rule here is NOWPayments' SDK's
    tampered = USDT.replace(b'"actually_paid":100.25', b'"actually_paid":1000.25', 1)
    assert tampered != USDT
    async with running_server(doc) as server:
        # 1. Refused with 401, nothing stored: a changed body, no header, a bad header.
        refused = await post(server, tampered, signed(USDT_SIGNATURE))
        assert (refused.status_code, refused.json()["error"]) == (401, "signature_mismatch")
        unsigned = await post(server, USDT, {"Content-Type": "application/json"})
        assert (unsigned.status_code, unsigned.json()["error"]) == (401, "signature_missing")
        malformed = await post(server, USDT, signed("zz" * 64))
        assert (malformed.status_code, malformed.json()["error"]) == (401, "signature_malformed")
        assert await rows(database_url) == []

        # 2. The genuine IPN: accepted under payment_id:payment_status, kept byte for byte.
        answer = await post(server, USDT, signed(USDT_SIGNATURE))
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"status": "accepted", "event_id": USDT_ID}
        [row] = await rows(database_url)
        assert (row["event_id"], row["event_type"]) == (USDT_ID, "finished")
        assert row["subject"] == "webhooks.nowpayments.finished"
        assert bytes(row["body"]) == USDT

        # 3. The same IPN again, as NOWPayments repeats one: a duplicate.
        again = await post(server, USDT, signed(USDT_SIGNATURE))
        assert (again.status_code, again.json()) == (
            200, {"status": "duplicate", "event_id": USDT_ID})  # fmt: skip

        # 4. The payment's next status is an event of its own; the older secret of a
        # rotation signs it.
        refunded = ipn(5077125051, "refunded")
        answer = await post(server, refunded, signed(signature(refunded, OLDER)))
        assert answer.json() == {"status": "accepted", "event_id": "5077125051:refunded"}

        # 5. An id past 2**53: NOWPayments writes the double (…992); a replay spelling it
        # …993 has the same signed text, so the same signature, and is a duplicate by its
        # digest although it claims another id.
        genuine = ipn(9007199254740992, "finished")
        sig = signature(genuine)
        assert (await post(server, genuine, signed(sig))).json()["status"] == "accepted"
        respelt = genuine.replace(b"9007199254740992", b"9007199254740993")
        replayed = await post(server, respelt, signed(sig))
        assert (replayed.status_code, replayed.json()) == (
            200, {"status": "duplicate", "event_id": "9007199254740993:finished"})  # fmt: skip

        async def published() -> list[Any]:
            found = await stream_messages(nats_url)
            ids = {m[1].get("Nats-Msg-Id") for m in found}
            return found if "nowpayments:9007199254740992:finished" in ids else []

        messages = await wait_until(published)
    stored = {r["event_id"]: r for r in await rows(database_url)}
    assert sorted(stored) == [USDT_ID, "5077125051:refunded", "9007199254740992:finished"]
    ours = [m for m in messages if m[0].startswith("webhooks.nowpayments.")]
    assert sorted(m[1]["Nats-Msg-Id"] for m in ours) == sorted(
        f"nowpayments:{event_id}" for event_id in stored
    )  # each once
    for subject, headers, data in ours:
        row = stored[headers["Nats-Msg-Id"].removeprefix("nowpayments:")]
        assert data == bytes(row["body"])
        assert subject == row["subject"] == f"webhooks.nowpayments.{row['event_type']}"
