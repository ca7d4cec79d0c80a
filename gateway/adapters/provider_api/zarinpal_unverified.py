"""Zarinpal's payments paid and not verified, `POST /pg/v4/payment/unVerified.json`:
the callbacks that never came, recovered (`gateway backfill zarinpal`, or on a schedule
with `[providers.NAME.backfill]`).

A payer who paid and closed the browser before it came back leaves a payment Zarinpal
will return to them unless it is verified in time; no callback will ever name it. The
list answers `{"data": {"code": 100, "authorities": [{"authority", "amount",
"callback_url", "referer", "date"}]}}` (zarinpal.com/docs/paymentGateway/otherMethods).
Each entry is recorded as the callback would have been: the query of its
`callback_url` (the order the merchant signed into it, `core.signatures.zarinpal`) with
`Authority` and `Status=OK` added, its order's signature checked as a callback's is.
Its verify is then owed as a live callback's is, and the gate makes it a duplicate of
a callback that did come (the same Authority and order). The amount is still checked
by Zarinpal's verify (`-50` is parked, never verified).

An entry whose `callback_url` carries no order signed with the provider's secrets (a
payment made through another integration of the same merchant id) is recorded and
parked with why, never dropped. The list has no pages and no time filter: every
unverified payment is listed, each time, and the gate keeps the ones already recorded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.http_json import ApiCalls
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock
from gateway.core.backfill.decisions import Window
from gateway.core.bodies.content import body_digest_id
from gateway.core.events.model import Failure
from gateway.core.providers.zarinpal import (
    OK_TYPE,
    UNVERIFIED_PATH,
    document,
    unverified_entries,
)
from gateway.core.signatures.base import SchemeParams, Verifier
from gateway.core.signatures.zarinpal import SCHEME
from gateway.errors import PayloadInvalid, ProviderApiAnswerInvalid, SignatureError
from gateway.settings.provider_api import ProviderApi

PATH = UNVERIFIED_PATH
_WHAT = f"POST {PATH}"
HEADERS = {"content-type": "application/x-www-form-urlencoded"}


def listed_authorities(doc: Any) -> list[Any]:
    """The answer's `data.authorities`; `ProviderApiAnswerInvalid` for any other shape
    (a refusal's `errors` included: the merchant id is wrong)."""
    try:
        return unverified_entries(doc)
    except PayloadInvalid as exc:
        raise ProviderApiAnswerInvalid(f"{_WHAT}: {exc}") from None


def callback_of(entry: Any) -> bytes:
    """The callback an entry's payer would have brought back: its `callback_url`'s
    query, with `Authority` and `Status=OK`; `PayloadInvalid` when it is not one."""
    if not isinstance(entry, dict):
        raise PayloadInvalid("an unverified payment that is not an object")
    url, authority = entry.get("callback_url"), entry.get("authority")
    if not isinstance(url, str) or not isinstance(authority, str):
        raise PayloadInvalid("an unverified payment without callback_url or authority")
    added = urlencode({"Authority": authority, "Status": "OK"})
    query = urlsplit(url).query
    return f"{query}&{added}".encode() if query else added.encode()


def listed_payment(entry: Any, verify: Verifier) -> Listed:
    """One unverified payment as its callback's row would hold it; parked with why
    when its `callback_url` carries no order signed with the provider's secrets (made
    through another integration of the same merchant id, or by nobody)."""
    try:
        body = callback_of(entry)
        verify({}, body, 0.0)
        doc = document(body)
    except (PayloadInvalid, SignatureError) as exc:
        raw = repr(entry)[:1024].encode()
        failure = Failure(exc.error_class, f"not a gateway callback: {exc}")
        return Listed(body_digest_id(raw), None, None, body=raw, headers=HEADERS, failure=failure)
    return Listed(doc["id"], OK_TYPE, None, body=body, headers=HEADERS)


class ZarinpalUnverified:
    """An `EventSource` over Zarinpal's unverified payments: one page, every time."""

    def __init__(self, api: ProviderApi, params: SchemeParams, clock: Clock = REAL_CLOCK) -> None:
        self._url = api.url + PATH
        self._verify = SCHEME.verifier(params)
        self._merchant_id = api.key
        headers = {"Accept": "application/json", "User-Agent": "payments-webhook-gateway"}
        self._calls = ApiCalls(api, headers, clock)

    async def page(self, cursor: str | None, window: Window) -> Page:
        doc, _ = await self._calls.post(self._url, {"merchant_id": self._merchant_id}, _WHAT)
        entries = listed_authorities(doc)
        return Page([listed_payment(e, self._verify) for e in entries], None, [])

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._calls.close()
