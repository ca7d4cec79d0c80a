"""Dead letters as the live path leaves them, for the console's tests: the event's own
row in `processed_webhooks` (its type, headers and trace), then the parked row with the
stored request, the error and its stack."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import asyncpg
import orjson

STRIPE_HEADERS = {
    "Content-Type": "application/json",
    "Stripe-Signature": "t=1733000000,v1=5257a869e7ecebeda32affa62cdca3fa"
    "51cad7e77a0e56ff536d0ce8e108d8bd",
    "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
}
STACK = (
    "Traceback (most recent call last):\n"
    '  File "gateway/settlement/worker.py", line 212, in settle\n'
    "    account = await ledger.account_for(event.merchant_id)\n"
    "gateway.errors.settlement.UnknownMerchant: no ledger account for merchant acct_1"
)


async def park(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    event_id: str,
    *,
    stage: str = "settlement",
    provider: str = "stripe",
    event_type: str | None = "payment_intent.succeeded",
    error_class: str = "UNKNOWN_MERCHANT",
    error_message: str | None = None,
    payload: bytes | None = None,
    headers: dict[str, Any] | None = None,
    attempts: int = 1,
    first_failed_at: datetime | None = None,
    resolved: bool = False,
    order_key: str | None = None,
    key_seq: int | None = None,
    with_event: bool = True,
) -> int:
    """Insert one dead letter (and its event's row unless `with_event` is False); its id."""
    body = (
        payload
        if payload is not None
        else orjson.dumps(
            {"id": event_id, "type": event_type, "data": {"object": {"amount": 1200}}}
        )
    )
    stored = orjson.dumps(headers if headers is not None else STRIPE_HEADERS).decode()
    webhook_id = None
    if with_event:
        webhook_id = await conn.fetchval(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers,"
            " body, received_at, body_sha256, traceparent, order_key, key_seq)"
            " VALUES ($1, $2, $3, $4, $5::jsonb, $6, coalesce($7, now()), $8, $9, $10, $11)"
            " RETURNING id",
            provider,
            event_id,
            event_type,
            None if event_type is None else f"webhooks.{provider}.{event_type}",
            stored,
            body,
            first_failed_at,
            hashlib.sha256(body).digest(),
            STRIPE_HEADERS["traceparent"],
            order_key,
            key_seq,
        )
    row_id: int = await conn.fetchval(
        "INSERT INTO dlq_webhooks (webhook_id, stage, provider, event_id, subject, error_class,"
        " error_message, error_detail, payload, headers, attempts, received_at,"
        " first_failed_at, last_failed_at, is_resolved, resolved_at, resolution,"
        " order_key, key_seq)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, coalesce($12, now()),"
        " coalesce($12, now()), coalesce($12, now()), $13, CASE WHEN $13 THEN now() END,"
        " CASE WHEN $13 THEN 'replayed' END, $14, $15) RETURNING id",
        webhook_id,
        stage,
        provider,
        event_id,
        None if event_type is None else f"webhooks.{provider}.{event_type}",
        error_class,
        error_message or f"no ledger account for {event_id}",
        STACK,
        body,
        stored,
        attempts,
        first_failed_at,
        resolved,
        order_key,
        key_seq,
    )
    return row_id
