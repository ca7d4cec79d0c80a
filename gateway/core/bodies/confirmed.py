"""The body of an event a confirmation recorded (`source = 'confirmed'`), read back.

Pure. A provider whose webhook is a form (Mollie's `id=tr_…`, Zarinpal's callback)
records the events its API confirms as compact JSON objects of the gateway's own, under
ids of their own (`tr_x:paid`, `A…:verified`). Its `document` reads both kinds of row:
a JSON body is one of these, and never yields an `id` or a `type`, so no request posted
as JSON can take the id of an event a confirmation records.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import PayloadInvalid


def confirmed_document(body: bytes, max_bytes: int, provider: str) -> dict[str, Any]:
    """The confirmed event's body as an object; `PayloadInvalid` when it is over
    `max_bytes`, not JSON, not an object, or holds `id` or `type`."""
    if len(body) > max_bytes:
        raise PayloadInvalid(f"the body is {len(body)} bytes (at most {max_bytes})")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PayloadInvalid(f"the body is neither a {provider} request nor JSON") from None
    if not isinstance(doc, dict) or "id" in doc or "type" in doc:
        raise PayloadInvalid(f"the body is JSON but not a confirmed {provider} event")
    return doc
