"""What the operator sees of per-key order: one key's state (`gateway ordering keys`), and
what a release did (`gateway ordering release`, `gateway dlq resolve` of a holder).

Plain values and pure decisions; the SQL is in `adapters.postgres.ordering.admin`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.errors import ErrorClass, OrderingUsageError

#: The blocked rows a release names one by one in its `gateway dlq replay --id ...` hint;
#: past this many the hint names them by provider and error class instead.
HINT_IDS_MAX = 10


@dataclass(frozen=True)
class KeyListing:
    """One key as `gateway ordering keys` lists it, from `order_counters` (ingest) and
    `order_applied` (settlement)."""

    provider: str
    order_key: str
    applied_seq: int  # 0 while settlement has applied nothing of the key
    last_seq: int | None  # the last number ingest gave; None: no counter (removed)
    # when ingest last numbered an event of the key, to within an hour (the counter's
    # time moves at most hourly, to keep its update in place)
    touched_at: datetime | None
    progressed_at: datetime | None  # when settlement last moved applied_seq
    held_seq: int | None = None
    held_dlq_id: int | None = None
    hold_reason: str | None = None
    held_at: datetime | None = None

    @property
    def held(self) -> bool:
        return self.held_at is not None


@dataclass(frozen=True)
class Release:
    """What releasing a held key did: `applied_seq` moved from `from_seq` to `to_seq`,
    each number after `from_seq` up to it logged as skipped by `actor` with `note` (a
    hold after a gap skips the missing numbers too, so the key's log still rises by
    exactly 1)."""

    provider: str
    order_key: str
    from_seq: int  # applied_seq before the release
    to_seq: int  # the held sequence, applied_seq now
    hold_reason: str
    dead_letter_id: int | None  # the blocking dead letter, now resolved by hand
    actor: str
    note: str
    parked_behind: tuple[int, ...]  # open dead letters of the key, still parked

    @property
    def skipped(self) -> int:
        return max(0, self.to_seq - self.from_seq)


def check_note(note: str) -> str:
    """The release note, stripped; refused when empty (it is the audited cause)."""
    text = note.strip()
    if not text:
        raise OrderingUsageError("--note must say why the key is released (it is kept)")
    return text


def replay_hint(provider: str, parked: Sequence[int]) -> str:
    """What the line says of the rows still parked behind a released key, and the
    command that replays them."""
    if not parked:
        return "no rows are parked behind it"
    rows = "1 blocked row stays" if len(parked) == 1 else f"{len(parked)} blocked rows stay"
    if len(parked) <= HINT_IDS_MAX:
        how = "gateway dlq replay " + " ".join(f"--id {i}" for i in parked)
    else:
        blocked = ErrorClass.BLOCKED_BY_PREDECESSOR.value
        how = f"gateway dlq replay --all --provider {provider} --error-class {blocked}"
    them = "it" if len(parked) == 1 else "them"
    return f"{rows} parked: replay {them} with {how}"


def release_line(release: Release) -> str:
    """The one line `gateway ordering release` prints."""
    held = (
        f"dead letter {release.dead_letter_id} resolved by hand, " if release.dead_letter_id else ""
    )
    if release.skipped <= 1:
        seqs = f"seq {release.to_seq}"
    else:
        seqs = f"seqs {release.from_seq + 1}-{release.to_seq}"
    return (
        f"released {release.provider} key {release.order_key} ({release.hold_reason}): "
        f"{held}{seqs} skipped by {release.actor}; "
        + replay_hint(release.provider, release.parked_behind)
    )
