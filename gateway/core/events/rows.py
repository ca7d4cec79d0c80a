"""An accepted event (a `processed_webhooks` row) as `gateway events` sees it: plain
values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class EventBrief:
    """An accepted event without its body or headers: what a table shows."""

    id: int
    provider: str
    event_id: str
    event_type: str | None
    subject: str | None
    source: str
    received_at: datetime
    publish_state: str  # published | waiting | parked | no subject
    payload_removed_at: datetime | None


@dataclass(frozen=True)
class EventRow:
    """One accepted event as stored."""

    brief: EventBrief
    headers: Mapping[str, Any]
    body: bytes
    publish_attempts: int
    # The key's number as ingest gave it (both or neither): a replay sends them again so
    # settlement applies the copy in its key's order, not outside it.
    order_key: str | None = None
    key_seq: int | None = None

    def __repr__(self) -> str:  # never print the body
        return f"EventRow(id={self.brief.id}, provider={self.brief.provider!r})"
