"""The public JSON of an accepted event: one shape, printed by `gateway events list
--json` and `gateway events show --json` and answered by the console's API (`GET
/console/api/v1/events` and `/events/{id}`), so the two cannot drift. Pure: the row's
model in, a document of JSON values out (times as `core.instants` writes them).

An event's own fields are metadata every role reads. Its body and header values are in
neither document: each reader adds them its own way (`events show --json` inline and
decoded, the API as a masked view, for investigators and above), and the API's detail
adds what it gathers from other tables (the key's place, the settlement, the dead
letters).
"""

from __future__ import annotations

from typing import Any

from gateway.core.dlq.view import trace_id
from gateway.core.events.rows import EventBrief, EventRow
from gateway.core.instants import instant


def brief_doc(r: EventBrief) -> dict[str, Any]:
    """One event of a list: `events list --json`, the API's list items. No body, no
    headers."""
    return {
        "id": r.id,
        "provider": r.provider,
        "event_id": r.event_id,
        "event_type": r.event_type,
        "subject": r.subject,
        "source": r.source,
        "received_at": instant(r.received_at),
        "publish_state": r.publish_state,
        "payload_removed_at": instant(r.payload_removed_at),
    }


def row_doc(row: EventRow) -> dict[str, Any]:
    """One event's own fields: its brief, how often publishing it failed, its key and
    number, the trace it belongs to (from its `traceparent`) and the names of the
    headers kept."""
    return brief_doc(row.brief) | {
        "publish_attempts": row.publish_attempts,
        "order_key": row.order_key,
        "key_seq": row.key_seq,
        "trace_id": trace_id(row.headers),
        "header_names": sorted(row.headers, key=str.lower),
    }
