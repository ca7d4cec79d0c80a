"""Mollie's next-gen webhooks end to end: events signed as Mollie signs them (checked
here with Mollie's own `mollie.utils.webhooks.SignatureValidator`, mollie-api-py),
posted to a real gateway on PostgreSQL and NATS JetStream.

A body changed after signing, an unsigned request and a header that is not a signature
are refused with `401` and store nothing; the genuine event is recorded byte for byte
and published once; the same delivery again is a `duplicate`; a delivery signed with
the older secret of a rotation (without the `sha256=` prefix, which Mollie's SDKs
accept too) and one carrying both signatures of a rotation in one header are accepted.
Nothing settles: these events declare no movements (the classic `mollie` provider
settles Mollie's payments).
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import orjson
import pytest
from mollie.utils.webhooks import SignatureValidator

from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import fetch

SECRET = "whsec_mollie_e2e_current_Tq7Wz2Lk9Pb4"
OLDER = "whsec_mollie_e2e_older_Hd5Ry8Nc3Vm6"
PAYLOADS = Path(__file__).parents[2] / "unit" / "core" / "providers" / "payloads" / "mollie_events"
FULL = (PAYLOADS / "payment_link_paid_full.json").read_bytes()
FULL_ID = "event_Hq4Tz7RbW2xLm9Vc5KdNp"


@pytest.fixture
def doc(database_url: str, nats_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url)
    found["providers"]["mollie_events"] = {"scheme": "mollie_events", "secrets": [SECRET, OLDER]}
    return found


def event(n: int, event_type: str = "sales-invoice.paid") -> bytes:
    """A simple payload (no `_embedded`), as Mollie sends one."""
    event_id = f"event_e2e{n:016d}"
    self = {"href": f"https://api.mollie.com/v2/events/{event_id}", "type": "application/hal+json"}
    return orjson.dumps({"resource": "event", "id": event_id, "type": event_type,
                         "entityId": f"invoice_e2e{n:08d}", "createdAt": "2026-12-06T10:00:00.0Z",
                         "_links": {"self": self}})  # fmt: skip


def signature(body: bytes, secret: str = SECRET) -> str:
    """Mollie's hex HMAC-SHA256 of the raw body, keyed with the signing secret as text."""
    mac = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    assert SignatureValidator.validate(body.decode("utf-8"), secret, mac)  # Mollie's own check
    return mac


def signed(value: str) -> dict[str, str]:
    return {"X-Mollie-Signature": value, "Content-Type": "application/json"}


async def post(server: RunningServer, body: bytes, headers: dict[str, str]) -> Any:
    return await server.client.post("/webhooks/mollie_events", content=body, headers=headers)


async def rows(dsn: str) -> list[Any]:
    return await fetch(
        dsn,
        "SELECT event_id, event_type, subject, body FROM processed_webhooks"
        " WHERE provider = 'mollie_events' ORDER BY event_id",
    )


async def test_signed_events_are_recorded_once_published_and_a_tampered_one_is_refused(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    tampered = FULL.replace(b'"38.50"', b'"3850.00"', 1)
    assert tampered != FULL
    async with running_server(doc) as server:
        # 1. Refused with 401, nothing stored: a changed body, no header, a bad header.
        refused = await post(server, tampered, signed("sha256=" + signature(FULL)))
        assert (refused.status_code, refused.json()["error"]) == (401, "signature_mismatch")
        unsigned = await post(server, FULL, {"Content-Type": "application/json"})
        assert (unsigned.status_code, unsigned.json()["error"]) == (401, "signature_missing")
        malformed = await post(server, FULL, signed("sha256=" + "zz" * 32))
        assert (malformed.status_code, malformed.json()["error"]) == (401, "signature_malformed")
        assert await rows(database_url) == []

        # 2. The genuine event: accepted under its own id, kept byte for byte.
        answer = await post(server, FULL, signed("sha256=" + signature(FULL)))
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"status": "accepted", "event_id": FULL_ID}
        [row] = await rows(database_url)
        assert (row["event_id"], row["event_type"]) == (FULL_ID, "payment-link.paid")
        assert row["subject"] == "webhooks.mollie_events.payment-link.paid"
        assert bytes(row["body"]) == FULL

        # 3. The same delivery again, as Mollie retries it: a duplicate.
        again = await post(server, FULL, signed("sha256=" + signature(FULL)))
        assert again.status_code == 200
        assert again.json() == {"status": "duplicate", "event_id": FULL_ID}

        # 4. Rotation: the older secret, no prefix; then both signatures in one header
        # (a repeated header as a proxy joins it), the older one first.
        older = event(1)
        assert (await post(server, older, signed(signature(older, OLDER)))).status_code == 200
        both = event(2, "balance-transaction.created")
        header = f"sha256={signature(both, OLDER)}, sha256={signature(both)}"
        assert (await post(server, both, signed(header))).status_code == 200

        async def published() -> list[Any]:
            found = await stream_messages(nats_url)
            ids = {m[1].get("Nats-Msg-Id") for m in found}
            return found if "mollie_events:event_e2e0000000000000002" in ids else []

        messages = await wait_until(published)
    stored = {r["event_id"]: r for r in await rows(database_url)}
    assert sorted(stored) == ["event_Hq4Tz7RbW2xLm9Vc5KdNp", "event_e2e0000000000000001",
                              "event_e2e0000000000000002"]  # fmt: skip
    mollie = [m for m in messages if m[0].startswith("webhooks.mollie_events.")]
    assert sorted(m[1]["Nats-Msg-Id"] for m in mollie) == sorted(
        f"mollie_events:{event_id}" for event_id in stored
    )  # each once
    for subject, headers, data in mollie:
        row = stored[headers["Nats-Msg-Id"].removeprefix("mollie_events:")]
        assert data == bytes(row["body"])
        assert subject == row["subject"] == f"webhooks.mollie_events.{row['event_type']}"
