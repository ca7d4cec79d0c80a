"""The public JSON of an ordering key and of a release: one shape, printed by `gateway
ordering keys --json` and `gateway ordering release --json` (and `gateway dlq resolve
--json` of a holder) and answered by the console's API (`GET /console/api/v1/keys`,
`POST /keys/release`), so the two cannot drift. Pure: the model in, a document of JSON
values out (times as `core.instants` writes them; `now` is passed in).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.core.instants import instant
from gateway.core.ordering.admin import KeyListing, Release


def key_doc(k: KeyListing, now: datetime) -> dict[str, Any]:
    """One key: where settlement and ingest stand, and, while it is held, why, since
    when (and for how long at `now`), which dead letter holds it and how many numbers
    were given after the held one (`blocked`; null when the key is not held or its
    counter is gone)."""
    held_s = None if k.held_at is None else max(0.0, (now - k.held_at).total_seconds())
    blocked = None
    if k.held and k.held_seq is not None and k.last_seq is not None:
        blocked = max(0, k.last_seq - k.held_seq)
    return {
        "provider": k.provider,
        "order_key": k.order_key,
        "applied_seq": k.applied_seq,
        "last_seq": k.last_seq,
        "held": k.held,
        "held_seq": k.held_seq,
        "hold_reason": k.hold_reason,
        "held_at": instant(k.held_at),
        "held_for_s": None if held_s is None else round(held_s, 3),
        "held_dlq_id": k.held_dlq_id,
        "blocked": blocked,
        "last_numbered_at": instant(k.touched_at),
        "progressed_at": instant(k.progressed_at),
    }


def release_doc(r: Release) -> dict[str, Any]:
    """What a release did."""
    return {
        "provider": r.provider,
        "order_key": r.order_key,
        "hold_reason": r.hold_reason,
        "applied_seq_before": r.from_seq,
        "applied_seq": r.to_seq,
        "skipped": r.skipped,
        "dead_letter_id": r.dead_letter_id,
        "released_by": r.actor,
        "note": r.note,
        "parked_behind": list(r.parked_behind),
    }
