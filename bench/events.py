"""Pre-signed Stripe requests for wrk, which cannot compute an HMAC-SHA256 itself.

Every request is a complete HTTP/1.1 message with a unique event id and a valid
`Stripe-Signature` for one timestamp. Ids, timestamps and the body template have fixed
widths, so every request in a set has the same length: the Lua script then slices
request `i` straight out of one file-sized string (`blob:sub`) instead of parsing lines,
which keeps wrk's `init()` down to one read. That matters because wrk starts thread 0
before it runs `init()` for thread 1, and counts its rate from after both.

Signatures come from the independent signer in `tests/support/vectors.py` (written from
Stripe's documentation, sharing no code with the gateway), so a gateway that misread the
scheme would answer 401 here and fail the run loudly.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.vectors import stripe_v1

PATH = "/webhooks/stripe"
_CHUNK_RECORDS = 10_000  # written in chunks so a 400k-request pool never sits in one list

MERCHANT_ID = "m_0001"  # the merchant every event pays (its account must exist to settle)
AMOUNT_MINOR = 1000  # what every event pays, in USD cents (`amount_received`)

# A Stripe `payment_intent.succeeded` event trimmed to ~350 bytes (design.md measures a
# ~300-byte body). Every substituted field has a fixed width.
_BODY = (
    '{{"id":"{event_id}","object":"event","api_version":"2024-06-20","created":{ts},'
    '"type":"payment_intent.succeeded","livemode":false,"pending_webhooks":1,'
    '"data":{{"object":{{"id":"pi_{event_id_tail}","object":"payment_intent",'
    '"amount":{amount},"amount_received":{amount},"currency":"usd","status":"succeeded",'
    '"metadata":{{"merchant_id":"{merchant}"}}}}}}}}'
)


@dataclass(frozen=True)
class RequestSet:
    """`threads` files `{prefix}.{tid}`, each `per_thread` requests of `record_len` bytes."""

    prefix: Path
    tag: str
    threads: int
    per_thread: int
    record_len: int
    signed_at_s: int

    def path(self, tid: int) -> Path:
        return Path(f"{self.prefix}.{tid}")

    def remove(self) -> None:
        for tid in range(self.threads):
            self.path(tid).unlink(missing_ok=True)


def new_tag() -> str:
    """Six hex characters that make one pool's event ids unique among all pools."""
    return secrets.token_hex(3)


def event_id(tag: str, tid: int, seq: int) -> str:
    """`evt_` + tag + thread (2 digits) + sequence (9 digits): fixed width by design."""
    return f"evt_{tag}{tid:02d}{seq:09d}"


def signed_requests(
    tag: str, tid: int, count: int, host: str, secret: str, ts: int
) -> Iterator[bytes]:
    """`count` complete requests of thread `tid`: event ids `event_id(tag, tid, 0..)`,
    each body an amount of 1000 (`AMOUNT_MINOR`) USD for merchant `MERCHANT_ID`."""
    for seq in range(count):
        eid = event_id(tag, tid, seq)
        body = _BODY.format(
            event_id=eid, event_id_tail=eid[4:], ts=ts, amount=AMOUNT_MINOR, merchant=MERCHANT_ID
        ).encode()
        signature = stripe_v1(secret, ts, body)
        yield (
            f"POST {PATH} HTTP/1.1\r\n"
            f"Host: {host}\r\n"
            "Content-Type: application/json\r\n"
            f"Stripe-Signature: t={ts},v1={signature}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "\r\n"
        ).encode() + body


def write_requests(
    prefix: Path,
    *,
    tag: str,
    threads: int,
    per_thread: int,
    host: str,
    secret: str,
    signed_at_s: int,
) -> RequestSet:
    """Write one file of signed requests per wrk thread.

    Called again with the same `tag` for the duplicates pass: same ids and bodies, a fresh
    timestamp and signature, as a provider's retry would carry.
    """
    if not 0 < threads < 100 or not 0 < per_thread < 10**9:
        raise ValueError("threads must be 1..99 and per_thread 1..999,999,999")
    record_len = 0
    for tid in range(threads):
        with Path(f"{prefix}.{tid}").open("wb") as out:
            chunk: list[bytes] = []
            for request in signed_requests(tag, tid, per_thread, host, secret, signed_at_s):
                if record_len == 0:
                    record_len = len(request)
                elif len(request) != record_len:
                    raise RuntimeError(
                        "signed requests differ in length; the Lua slicing needs one"
                    )
                chunk.append(request)
                if len(chunk) == _CHUNK_RECORDS:
                    out.write(b"".join(chunk))
                    chunk.clear()
            out.write(b"".join(chunk))
    return RequestSet(prefix, tag, threads, per_thread, record_len, signed_at_s)
