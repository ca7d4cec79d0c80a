"""What the event log's pages and API answer with: one event's detail, gathered from its
row (whose fields are `core.events.public`'s, as the CLI prints them), its dead
letters, its key's place and its settlement. The routes are in
`gateway.console.events`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from gateway.adapters.postgres import Conn, settlements
from gateway.adapters.postgres.console import events as store
from gateway.adapters.postgres.events import get_event
from gateway.core.console.event_settlement import SettlementAsked, settlement_asked
from gateway.core.dlq.view import masked_headers, payload_view
from gateway.core.events.public import row_doc
from gateway.core.events.rows import EventBrief, EventRow
from gateway.core.events.search import PublishState
from gateway.core.instants import instant
from gateway.core.payload_text import shown_message
from gateway.settings import ProviderSettings

#: What each publish state means, as the pages say it.
PUBLISH_MEANING = {
    PublishState.PUBLISHED.value: "on the stream",
    PublishState.WAITING.value: "owed: waiting in the outbox",
    PublishState.PARKED.value: "parked: the relay gave up (see its publish dead letter)",
    PublishState.NO_SUBJECT.value: "never published: parked at ingest, no subject",
}

#: Why a body retention removed settles nothing (metadata: every role reads it).
REMOVED = "its body was removed by retention"
#: What the settlement block says of a body its extractor refused, below investigator.
UNREADABLE = "its body cannot be settled"


def replay_link(pairs: list[tuple[str, str]]) -> str:
    """The replay planner, asked to plan these events (`kind=events` and the filter)."""
    return "/console/replays/new?" + urlencode([("kind", "events"), *pairs])


@dataclass(frozen=True)
class EventDetail:
    row: EventRow
    dead_letters: list[store.EventDeadLetter]
    key: store.KeyPlace | None
    settlement: dict[str, Any]


async def event_detail(
    conn: Conn, providers: Mapping[str, ProviderSettings], row_id: int
) -> EventDetail | None:
    row = await get_event(conn, row_id)
    if row is None:
        return None
    b = row.brief
    dead = await store.dead_letters_of(conn, b.id, b.provider, b.event_id)
    key = None
    if row.order_key is not None and row.key_seq is not None:
        key = await store.key_place(conn, b.provider, row.order_key, row.key_seq)
    return EventDetail(row, dead, key, await _settlement(conn, providers, row))


async def _settlement(
    conn: Conn, providers: Mapping[str, ProviderSettings], row: EventRow
) -> dict[str, Any]:
    """Where the event's settlement stands: the worker's own transfer id, read from the
    body (a body retention removed can no longer say). What the body asks for (transfer,
    kind, settlement id, amount, currency) and an extractor's message quoting it are
    payload: `settlement_doc` keeps them from a role that may not read payloads."""
    b = row.brief
    if b.payload_removed_at is not None:
        return {"state": None, "reason": REMOVED}
    schemes = {name: p.scheme for name, p in providers.items()}
    merchants = {n: p.merchant for n, p in providers.items() if p.merchant is not None}
    asked = settlement_asked(b.provider, b.event_type, row.body, schemes, merchants)
    if asked.transfer_id is None or asked.instruction is None:
        return {"state": None, "reason": asked.reason, "public_reason": _public_reason(b, asked)}
    found = await settlements.by_transfer(conn, asked.transfer_id)
    base = {
        # As the CLI prints ledger ids (`gateway ledger balances`): one format.
        "transfer_id": f"{asked.transfer_id:#034x}",
        "kind": asked.instruction.kind.value,
        "settlement_id": asked.instruction.settlement_id,
        "amount_minor": asked.instruction.amount_minor,
        "currency": asked.instruction.currency,
    }
    if found is None:
        return base | {"state": "not started", "reason": "no settlement row yet", "attempts": 0}
    return base | {"state": found.state.value, "reason": "", "attempts": found.attempts}


def _public_reason(b: EventBrief, asked: SettlementAsked) -> str:
    """The reason there is no settlement, as a viewer may read it: that the source or
    type does not settle (metadata), else only that the body cannot be settled; an
    extractor's message quotes the body, so anything else is replaced."""
    does_not_settle = f"{b.provider} events of type {b.event_type or 'no type'} do not settle"
    return asked.reason if asked.reason == does_not_settle else UNREADABLE


def settlement_doc(s: dict[str, Any], *, with_payload: bool) -> dict[str, Any]:
    """The settlement block for one role: everything `with_payload`; otherwise only the
    state, why there is none, and the worker's attempts, nothing read from the body."""
    public = s.get("public_reason", s["reason"])
    if with_payload:
        return {k: v for k, v in s.items() if k != "public_reason"}
    doc = {"state": s["state"], "reason": public}
    if "attempts" in s:
        doc["attempts"] = s["attempts"]
    return doc


def detail_doc(d: EventDetail, *, with_payload: bool) -> dict[str, Any]:
    """The API's answer for one event: its own fields as `gateway events show --json`
    prints them (`core.events.public`), what the console gathers beside them (the key's
    place, the settlement, the dead letters), and the header values (masked) and the
    payload's view only `with_payload` (null otherwise)."""
    row, b = d.row, d.row.brief
    doc = row_doc(row) | {
        "key": None if d.key is None else _key_doc(d.key),
        "settlement": settlement_doc(d.settlement, with_payload=with_payload),
        "dead_letters": dead_letter_docs(d, with_payload=with_payload),
    }
    if not with_payload:
        return doc | {"headers": None, "payload": None}
    view = payload_view(row.body, removed=b.payload_removed_at is not None)
    return doc | {
        "headers": {h.name: h.value for h in masked_headers(row.headers)},
        "payload": {
            "form": view.form.value,
            "size_bytes": view.size_bytes,
            "sha256": view.sha256,
            "text": view.raw,
            "truncated": view.truncated,
        },
    }


def _key_doc(k: store.KeyPlace) -> dict[str, Any]:
    doc = asdict(k)
    doc["held_at"] = instant(k.held_at)
    return doc


def dead_letter_docs(d: EventDetail, *, with_payload: bool) -> list[dict[str, Any]]:
    """The event's dead letters; a message that may quote the body only `with_payload`
    (`core.payload_text`), else its length."""
    docs = []
    for x in d.dead_letters:
        shown = shown_message(x.error_message, x.stage, reads_payloads=with_payload)
        doc = asdict(x) | {
            "error_message": shown.text,
            "error_message_chars": shown.length_chars,
            "error_message_withheld": shown.withheld,
            "last_failed_at": instant(x.last_failed_at),
        }
        docs.append(doc)
    return docs
