"""Settlement's edges against real PostgreSQL, NATS and the worker: an amount wider than
the ledgers' range, a currency that is three letters only once case-folded, and a huge
merchant id, each parked with its precise class and a bounded message."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.money import AMOUNT_MAX
from tests.integration.settlement.test_settlement import (
    dlq_rows,
    handled,
    internal,
    payment,
    post_internal,
    post_stripe,
)
from tests.support.gateway import config, running_server
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

HUGE_MERCHANT_CHARS = 300_000


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    # Room for a 300 KB merchant id in a body (the tests' default limit is 64 KiB).
    return config(database_url, nats_url, **settlement_sections(stub.url, redis_url),
                  http={"max_body_bytes": 1_000_000})  # fmt: skip


async def test_amounts_wider_than_the_ledgers_are_invalid_amount(
    doc: dict[str, Any], database_url: str
) -> None:
    """2**64-1 (the widest integer JSON parsers keep) and 2**63 from Stripe and from an
    internal publisher are parked as INVALID_AMOUNT, not DATABASE_ERROR, and write no
    settlement; 2**63-1, the bound itself, settles."""
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        for n, amount in enumerate((2**64 - 1, 2**63)):
            body = payment(f"evt_wide_{n}", f"pi_wide_{n}", amount, currency="usd")
            assert await post_stripe(server, f"evt_wide_{n}", body) == "accepted"
            await post_internal(server, f"wide-{n}", internal("captured", f"s_wide_{n}", amount))
        widest = payment("evt_widest", "pi_widest", AMOUNT_MAX, currency="usd")
        assert await post_stripe(server, "evt_widest", widest) == "accepted"
        await wait_until(lambda: handled(database_url, 5))
        assert await merchant_balance(parts, "m_1") == AMOUNT_MAX
    assert await dlq_rows(database_url) == [("settlement", "INVALID_AMOUNT")] * 4
    rows = await fetch(database_url, "SELECT settlement_id, state FROM settlements")
    assert [(r["settlement_id"], r["state"]) for r in rows] == [("pi_widest", "settled")]


async def test_a_currency_must_be_three_ascii_letters_before_case_folding(
    doc: dict[str, Any], database_url: str
) -> None:
    """`"u\\u017fd"` (a long s) upper-cases to USD; it is parked as FIELD_TYPE_INVALID and
    credits nothing, and so are a fullwidth USD and a Kelvin-sign code; `usd` settles."""
    odd = {"long_s": "u\u017fd", "fullwidth": "\uff35\uff33\uff24", "kelvin": "\u212aWD"}
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        for name, currency in odd.items():
            body = payment(f"evt_{name}", f"pi_{name}", 1000, currency=currency)
            assert await post_stripe(server, f"evt_{name}", body) == "accepted"
        await post_internal(server, "odd-ccy", internal("captured", "s_odd", 1000, "u\u017fd"))
        body = payment("evt_plain", "pi_plain", 700, currency="usd")
        assert await post_stripe(server, "evt_plain", body) == "accepted"
        await wait_until(lambda: handled(database_url, 5))
        assert await merchant_balance(parts, "m_1") == 700
    assert await dlq_rows(database_url) == [("settlement", "FIELD_TYPE_INVALID")] * 4
    rows = await fetch(database_url, "SELECT settlement_id, currency FROM settlements")
    assert [(r["settlement_id"], r["currency"]) for r in rows] == [("pi_plain", "USD")]


async def test_a_huge_merchant_id_is_not_repeated_in_the_dead_letter(
    doc: dict[str, Any], database_url: str
) -> None:
    """A 300 KB merchant id is parked as FIELD_TYPE_INVALID (ids are bounded at
    `ID_CHARS_MAX`); the dead letter's message names the field and the id's length, and
    neither the message nor the stack repeats it (the payload keeps the event as sent)."""
    merchant = "m_" + "x" * (HUGE_MERCHANT_CHARS - 2)
    body = payment("evt_huge", "pi_huge", 1000, currency="usd", merchant=merchant)
    async with running_server(doc) as server, running_worker(doc):
        assert await post_stripe(server, "evt_huge", body) == "accepted"
        await wait_until(lambda: handled(database_url, 1))
    [row] = await fetch(
        database_url, "SELECT error_class, error_message, error_detail, payload FROM dlq_webhooks"
    )
    assert row["error_class"] == "FIELD_TYPE_INVALID"
    message = row["error_message"]
    assert f"merchant_id: expected at most 255 characters, not {HUGE_MERCHANT_CHARS}" in message
    assert len(message) < 400, len(message)
    assert len(row["error_detail"]) < 10_000, len(row["error_detail"])
    assert bytes(row["payload"]) == body
