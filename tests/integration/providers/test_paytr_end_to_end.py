"""PayTR end to end: callbacks signed by `gateway sign paytr` and, independently, by
the rule of PayTR's sample code (`hmac` and `base64` here), posted as the form PayTR
sends to a real gateway on PostgreSQL and NATS JetStream.

A signed callback is answered `200` with the body `OK` and nothing else (what PayTR
waits for), recorded once byte for byte and published once; the same callback again,
as PayTR repeats it every minute until it reads `OK`, is a duplicate answered `OK`; a
failure and a later success of one order are two events; a callback changed after
signing or without its hash is refused `401` and stores nothing; a signed callback the
gateway cannot read is recorded, parked and answered `OK`; and a success is settled by
the real worker for the merchant `[providers.paytr] merchant` points at.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from gateway.cli import main as gateway_main
from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled
from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

KEY, SALT = "e2eKey7Tq2Lm9Pb4", "e2eSalt3Vm6Hd5Ry"
OLD_KEY, OLD_SALT = "e2eOldKey8Nc3Wz", "e2eOldSalt2Kx7"
ORDER = "E2EORDER1"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
#: A reason as PayTR writes it, in Turkish ("the customer did not pay").
REASON = "Müşteri ödeme yapmadı"  # noqa: RUF001 - Turkish's dotless i, as PayTR sends it


@pytest.fixture
def doc(database_url: str, nats_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url)
    found["providers"]["paytr"] = {
        "scheme": "paytr",
        "secrets": [f"{KEY}:{SALT}", f"{OLD_KEY}:{OLD_SALT}"],
    }
    return found


def fields(order: str = ORDER, status: str = "success", **extra: str) -> dict[str, str]:
    found = {"merchant_oid": order, "status": status,
             "total_amount": "3456" if status == "success" else "0",
             "payment_type": "card"}  # fmt: skip
    if status == "success":
        found |= {"currency": "TL", "payment_amount": "3456"}
    else:
        found |= {"failed_reason_code": "6", "failed_reason_msg": REASON}
    return found | extra


def paytr_form(found: dict[str, str], key: str = KEY, salt: str = SALT) -> bytes:
    """The form with PayTR's hash, computed as its sample code computes it."""
    message = found["merchant_oid"] + salt + found["status"] + found["total_amount"]
    mac = hmac.new(key.encode(), message.encode(), hashlib.sha256).digest()
    return urlencode({**found, "hash": base64.b64encode(mac).decode()}).encode()


def signed_by_cli(tmp_path: Path, found: dict[str, str]) -> tuple[dict[str, str], bytes]:
    """`gateway sign paytr --secret KEY:SALT`: the headers and the signed form."""
    body_path = tmp_path / "callback.form"
    body_path.write_bytes(urlencode(found).encode())
    out = io.StringIO()
    with redirect_stdout(out):
        status = gateway_main(["sign", "paytr", "--secret", f"{KEY}:{SALT}",
                               "--body", str(body_path), "--json"])  # fmt: skip
    assert status == 0
    answer = json.loads(out.getvalue())
    return answer["headers"], answer["body"].encode()


async def post(server: RunningServer, body: bytes, headers: dict[str, str] = FORM) -> Any:
    return await server.client.post("/webhooks/paytr", content=body, headers=headers)


async def rows(dsn: str) -> list[Any]:
    return await fetch(
        dsn,
        "SELECT event_id, event_type, subject, body FROM processed_webhooks"
        " WHERE provider = 'paytr' ORDER BY id",
    )


def answered_ok(answer: Any) -> bool:
    return bool(
        answer.status_code == 200
        and answer.content == b"OK"
        and answer.headers["content-type"].startswith("text/plain")
    )


async def test_a_callback_is_answered_ok_recorded_once_and_published_once(
    doc: dict[str, Any], database_url: str, nats_url: str, tmp_path: Path
) -> None:
    headers, body = signed_by_cli(tmp_path, fields())
    assert body == paytr_form(fields())  # the CLI signs as PayTR's sample code does
    genuine = body
    async with running_server(doc) as server:
        # 1. Refused with 401, nothing stored: changed after signing, without a hash.
        tampered = genuine.replace(b"total_amount=3456", b"total_amount=345600")
        refused = await post(server, tampered)
        assert (refused.status_code, refused.json()["error"]) == (401, "signature_mismatch")
        unsigned = await post(server, urlencode(fields()).encode())
        assert (unsigned.status_code, unsigned.json()["error"]) == (401, "signature_missing")
        assert await rows(database_url) == []

        # 2. The genuine callback: `OK`, recorded under the order and its outcome.
        assert answered_ok(await post(server, genuine, headers))
        [row] = await rows(database_url)
        assert (row["event_id"], row["event_type"]) == (f"{ORDER}:success", "success")
        assert row["subject"] == "webhooks.paytr.success"
        assert bytes(row["body"]) == genuine

        # 3. PayTR's repeat: a duplicate, answered `OK` all the same; nothing added.
        assert answered_ok(await post(server, genuine))
        assert len(await rows(database_url)) == 1

        # 4. One order failed, then paid (signed with the older pair of a rotation):
        # two events, each once.
        failed = paytr_form(fields("E2EORDER2", "failed"), OLD_KEY, OLD_SALT)
        assert answered_ok(await post(server, failed))
        assert answered_ok(await post(server, paytr_form(fields("E2EORDER2"))))
        assert answered_ok(await post(server, failed))

        async def published() -> list[Any]:
            found = await stream_messages(nats_url)
            return found if len(found) >= 3 else []

        messages = await wait_until(published)
    ids = [r["event_id"] for r in await rows(database_url)]
    assert ids == [f"{ORDER}:success", "E2EORDER2:failed", "E2EORDER2:success"]
    msg_ids = sorted(m[1]["Nats-Msg-Id"] for m in messages)
    assert msg_ids == ["paytr:E2EORDER1:success", "paytr:E2EORDER2:failed",
                       "paytr:E2EORDER2:success"]  # fmt: skip
    [published_genuine] = [m for m in messages if m[1]["Nats-Msg-Id"].endswith("1:success")]
    assert published_genuine[0] == "webhooks.paytr.success"
    assert published_genuine[2] == genuine
    assert await fetch(database_url, "SELECT event_id FROM dlq_webhooks") == []


async def test_a_signed_callback_it_cannot_read_is_recorded_parked_and_answered_ok(
    doc: dict[str, Any], database_url: str
) -> None:
    """Genuine but over the form's bound: refusing it would have PayTR send it every
    minute for ever; it is recorded under its digest and parked instead."""
    padded = paytr_form(fields("E2EORDER3", failed_reason_msg="x" * 5_000, status="failed"))
    async with running_server(doc) as server:
        assert answered_ok(await post(server, padded))
    [row] = await fetch(database_url, "SELECT event_id, error_class, stage FROM dlq_webhooks")
    assert row["event_id"].startswith("sha256:")
    assert (row["error_class"], row["stage"]) == ("PAYLOAD_INVALID", "ingest")


async def test_a_success_is_settled_for_the_merchant_the_setting_names(
    doc: dict[str, Any], database_url: str, stub: Stub, redis_url: str
) -> None:
    """In USD, the ledger's currency; the merchant is the link callback's store number
    (`merchant = ["/merchant_id"]`); a failure settles nothing."""
    doc |= settlement_sections(stub.url, redis_url)
    doc["providers"]["paytr"]["merchant"] = ["/merchant_id"]
    store = "m_paytr_123456"
    paid = fields("E2EORDER4", currency="USD", merchant_id=store)
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, store)
        assert answered_ok(await post(server, paytr_form(fields("E2EORDER4", "failed"))))
        assert answered_ok(await post(server, paytr_form(paid)))
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, store) == 3_456
    assert await settled(database_url, "paytr") == [("capture", None, 3_456, store)]
