"""`GET /callbacks/NAME`: a payer's browser coming back from a provider that sends no
webhook (Zarinpal, `Provider.callback`). The request's query is the event's body, taken
through the same path as a webhook (`endpoints.ingest`: verified, recorded under the
idempotency gate, committed); the browser is then sent on to the operator's
`return_url` with the order and the provider's status, and never shown the gateway's
JSON. A refusal keeps its status and JSON: nobody but a forger or a broken link gets
one. A callback the gateway could not record (503) is not lost for good: the payment
is still in the provider's list of those paid and not verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

from starlette.types import Message, Scope, Send

from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.ingest.deadlines import Deadlines
from gateway.ingest.endpoints import Gate, ingest, send_json
from gateway.ingest.parts import IngestParts
from gateway.settings import ProviderSettings

CALLBACKS_PREFIX = "/callbacks/"
#: The most bytes of a callback's query: far above what a provider appends to a
#: merchant's URL and its signed order (about 200), and the most a callback's document
#: reads (`core.providers.zarinpal.CALLBACK_BYTES_MAX`); a longer one is refused (414)
#: before anything is recorded, never cut.
QUERY_BYTES_MAX = 2_048
#: The headers a callback's body takes the place of.
_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding", b"content-type"})


def return_location(return_url: str, query: bytes) -> str:
    """`return_url` with the callback's `order` and `status` added to its query."""
    try:
        fields = form_fields(query)
    except FormInvalid:
        fields = {}
    added = urlencode({"order": fields.get("order", ""), "status": fields.get("Status", "")})
    joiner = "&" if urlsplit(return_url).query else "?"
    return f"{return_url}{joiner}{added}"


async def callback(
    parts: IngestParts,
    deadlines: Deadlines,
    scope: Scope,
    send: Send,
    label: str,
    gate: Gate,
    return_url: str,
) -> None:
    """Take the callback as a webhook whose body is its query; answer a redirect."""
    query: bytes = scope.get("query_string", b"")
    if len(query) > QUERY_BYTES_MAX:
        detail = f"the callback's query is {len(query)} bytes (at most {QUERY_BYTES_MAX})"
        await send_json(send, 414, {"error": "uri_too_long", "detail": detail})
        return
    headers = [(k, v) for k, v in scope["headers"] if k not in _BODY_HEADERS]
    headers.append((b"content-length", str(len(query)).encode()))
    as_post = {**scope, "method": "POST", "headers": headers, "query_string": b""}
    given = False

    async def receive() -> Message:
        nonlocal given
        if given:  # nothing more: the body was all of it
            return {"type": "http.disconnect"}
        given = True
        return {"type": "http.request", "body": query, "more_body": False}

    redirected = False

    async def answer(message: Message) -> None:
        nonlocal redirected
        if message["type"] == "http.response.start" and message["status"] == 200:
            redirected = True
            location = return_location(return_url, query).encode()
            message = {"type": "http.response.start", "status": 303,
                       "headers": [(b"location", location), (b"content-length", b"0"),
                                   (b"cache-control", b"no-store")]}  # fmt: skip
        elif message["type"] == "http.response.body" and redirected:
            message = {"type": "http.response.body", "body": b""}
        await send(message)

    await ingest(parts, deadlines, as_post, receive, answer, label, gate)


def callback_urls(providers: Mapping[str, ProviderSettings]) -> dict[str, str]:
    """The `return_url` of each configured provider whose requests are callbacks."""
    return {name: p.return_url for name, p in providers.items() if p.return_url is not None}
