"""The usual webhook shaped in one pass: `webhook_event` prepared once per provider.

The gateway calls this per request; anything unusual is handed to `model.webhook_event`,
where the rules for bad content are written once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeGuard

import orjson

from gateway.core.bodies.content import DEFAULT_HEADERS, HeaderPolicy, storable_headers
from gateway.core.events.ids import MAX_EVENT_ID_CHARS
from gateway.core.events.model import (
    MAX_EVENT_TYPE_CHARS,
    Event,
    OrderedSubject,
    Source,
    new_event,
    webhook_event,
    webhook_subject,
)
from gateway.core.ordering.keys import KeyRule, order_key_of
from gateway.core.signatures.base import FieldRef
from gateway.core.type_patterns import type_allowed
from gateway.errors import PayloadInvalid

#: A verified webhook shaped into its event: (headers, body, received_at, body_sha256).
WebhookShaper = Callable[[Mapping[str, str], bytes, datetime, "bytes | None"], Event]


def _plain(text: object, max_chars: int) -> TypeGuard[str]:
    """`text` is a string that `as_text` keeps as it is and that the id and type rules
    accept: not empty, at most `max_chars`, printable (so no NUL and no tab), no blank
    at either end."""
    return (
        type(text) is str
        and 0 < len(text) <= max_chars
        and text.isprintable()
        and text[0] != " "
        and text[-1] != " "
    )


def webhook_shaper(
    provider: str,
    id_ref: FieldRef,
    type_ref: FieldRef,
    *,
    header_policy: HeaderPolicy = DEFAULT_HEADERS,
    event_types: tuple[str, ...] | None = None,
    source: str = Source.LIVE,
    order_rules: tuple[KeyRule, ...] = (),
    ordered: OrderedSubject | None = None,
    decode: Callable[[bytes], Any] | None = None,
) -> WebhookShaper:
    """`webhook_event` for one provider, prepared once: what the gateway calls per request.

    The usual delivery (a JSON object whose id and type are plain strings, a type the
    allow-list takes, headers without NUL) is shaped in one pass over the parsed body.
    Anything else is handed to `webhook_event`, which finds the problem: both give the
    same event for every input (`tests/unit/core/test_shaping_fast_path.py` holds them
    equal), and the rules stay written once, there.

    With `order_rules` and an `ordered` predicate, an event on an ordered subject carries
    its key, read from the body already parsed here; without either, none is looked for.
    A provider whose body is not JSON brings its `decode` (`Provider.document`).
    """
    read_id, read_type = id_ref.read, type_ref.read
    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
    keyed = ordered if order_rules and ordered is not None else None

    def shape(
        headers: Mapping[str, str], body: bytes, received_at: datetime, body_sha256: bytes | None
    ) -> Event:
        try:
            doc = loads(body) if decode is None else decode(body)
        except (JSONDecodeError, PayloadInvalid):
            doc = None
        if type(doc) is dict:
            event_id = read_id(headers, doc)
            event_type = read_type(headers, doc)
            if (
                _plain(event_id, MAX_EVENT_ID_CHARS)
                and _plain(event_type, MAX_EVENT_TYPE_CHARS)
                and (event_types is None or type_allowed(event_type, event_types))
            ):
                kept_headers, had_nul = storable_headers(headers, header_policy)
                if not had_nul:
                    subject = webhook_subject(provider, event_type)
                    key = None
                    if keyed is not None and keyed(subject):
                        key = order_key_of(order_rules, event_type, doc)
                    return new_event(provider, event_id, event_type, subject, kept_headers,
                                     body, received_at, None, body_sha256, source, None,
                                     key)  # fmt: skip
        return webhook_event(
            provider,
            id_ref,
            type_ref,
            headers,
            body,
            received_at,
            header_policy=header_policy,
            event_types=event_types,
            body_sha256=body_sha256,
            source=source,
            order_rules=order_rules,
            ordered=ordered,
            decode=decode,
        )

    return shape
