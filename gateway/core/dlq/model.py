"""A dead-letter row, and the table's health, as the DLQ commands and replay handlers see
them: plain values."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime


class RowOutcome(enum.StrEnum):
    """What a replay did with one row."""

    REPLAYED = "replayed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WOULD_REPLAY = "would_replay"  # dry run


@dataclass(frozen=True)
class RowBrief:
    """A dead-letter row without its payload, headers or stack: what a table shows."""

    id: int
    stage: str
    provider: str
    event_id: str
    subject: str | None
    error_class: str
    attempts: int
    received_at: datetime
    first_failed_at: datetime
    last_failed_at: datetime
    is_resolved: bool
    resolution: str | None
    source: str | None = None  # how the event arrived (live, backfill); None: no event row
    error_message: str | None = None  # read by the lists (CLI and console); a replay plan: None


@dataclass(frozen=True)
class DlqRow:
    """One dead-letter row as stored."""

    id: int
    webhook_id: int | None
    stage: str
    provider: str
    event_id: str
    subject: str | None
    error_class: str
    error_message: str
    error_detail: str | None
    payload: bytes
    headers: Mapping[str, str]
    attempts: int
    received_at: datetime
    first_failed_at: datetime
    last_failed_at: datetime
    is_resolved: bool
    resolved_at: datetime | None
    resolution: str | None
    resolution_note: str | None
    resolved_by: str | None
    # Set when retention emptied `payload` and `headers` (they are then empty): such a
    # row can be read, never replayed.
    payload_removed_at: datetime | None = None
    source: str | None = None  # how the event arrived (live, backfill); None: no event row
    #: Its automatic replays (`[dlq] auto_replay`); a failed one also counts in `attempts`.
    auto_replays: int = 0

    def __repr__(self) -> str:  # never print the payload
        return (
            f"DlqRow(id={self.id}, stage={self.stage!r}, provider={self.provider!r}, "
            f"event_id={self.event_id!r}, error_class={self.error_class!r})"
        )


@dataclass(frozen=True)
class DlqStats:
    """The DLQ's health at one moment."""

    unresolved: int
    by_class: list[tuple[str, str, int]]  # (stage, error_class, unresolved rows)
    added_in_window: int
    window_s: float
    oldest_unresolved_at: datetime | None
