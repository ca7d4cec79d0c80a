"""What an operator asked the DLQ commands for: which rows, and how a replay runs.

The times and ids inside are read by `core.operator_input`, as every command reads them.
Pure: `now` is passed in. Every problem is a `DlqUsageError` whose message is the one
line the operator sees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.core.model import Stage
from gateway.core.operator_input import parse_ids, parse_instant
from gateway.errors import DlqUsageError, UsageError


@dataclass(frozen=True)
class DlqFilter:
    """Which dead-letter rows a command applies to (empty tuples mean any)."""

    stages: tuple[str, ...] = ()
    error_classes: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    since: datetime | None = None  # first failure at or after
    until: datetime | None = None  # first failure before
    resolved: bool | None = False  # None: both

    @property
    def narrowed(self) -> bool:
        """True if any filter beyond the default resolved/unresolved choice was given."""
        return bool(self.stages or self.error_classes or self.providers or self.since or self.until)


def build_filter(
    now: datetime,
    *,
    stages: Sequence[str] = (),
    error_classes: Sequence[str] = (),
    providers: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    resolved: bool = False,
    unresolved: bool = False,
    include_all: bool = False,
) -> DlqFilter:
    """Check the filter flags together and turn them into a `DlqFilter`."""
    known = [s.value for s in Stage]
    for stage in stages:
        if stage not in known:
            raise DlqUsageError(f"--stage: unknown stage {stage!r} (one of {', '.join(known)})")
    if sum((resolved, unresolved, include_all)) > 1:
        raise DlqUsageError("--resolved, --unresolved and --any exclude each other; give one")
    try:
        start = parse_instant(since, now, "--since") if since else None
        end = parse_instant(until, now, "--until") if until else None
    except UsageError as exc:  # the shared syntax, reported as this command's mistake
        raise DlqUsageError(str(exc)) from None
    if start is not None and end is not None and start >= end:
        raise DlqUsageError("--since must be earlier than --until")
    return DlqFilter(
        stages=tuple(dict.fromkeys(stages)),
        # Error classes are upper-case names; accept what an operator types at 3 a.m.
        error_classes=tuple(dict.fromkeys(c.upper() for c in error_classes)),
        providers=tuple(dict.fromkeys(providers)),
        since=start,
        until=end,
        resolved=None if include_all else resolved,
    )


@dataclass(frozen=True)
class ReplayOptions:
    """How a replay runs: which rows, how fast, and what counts as given up."""

    ids: tuple[int, ...] = ()
    limit: int | None = None
    rate_per_s: float | None = None
    max_attempts: int = 5
    force: bool = False
    dry_run: bool = False
    #: Replay in arrival order (received_at, id) instead of each key's rows in key_seq
    #: order. Off by default: a key's events settle only in their order.
    unordered: bool = False


def check_replay_flags(
    *,
    ids: Sequence[str],
    replay_all: bool,
    dlq_filter: DlqFilter,
    limit: int | None,
    rate_per_s: float | None,
    max_attempts: int,
    force: bool,
    dry_run: bool,
    unordered: bool = False,
) -> ReplayOptions:
    """Refuse contradictory or meaningless replay flags; return the options to run."""
    if ids and replay_all:
        raise DlqUsageError("--id and --all exclude each other; give one")
    if not ids and not replay_all:
        raise DlqUsageError("say which rows: --id ID (repeatable) or --all with filters")
    if ids and (dlq_filter.narrowed or limit is not None):
        raise DlqUsageError("filters and --limit apply to --all, not to --id")
    if limit is not None and limit <= 0:
        raise DlqUsageError(f"--limit must be a positive number, got {limit}")
    if rate_per_s is not None and not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise DlqUsageError(
            f"--rate must be a positive number of rows per second, got {rate_per_s}"
        )
    if max_attempts <= 0:
        raise DlqUsageError(f"--max-attempts must be a positive number, got {max_attempts}")
    try:
        row_ids = parse_ids(ids)
    except UsageError as exc:
        raise DlqUsageError(str(exc)) from None
    return ReplayOptions(
        ids=row_ids,
        limit=limit,
        rate_per_s=rate_per_s,
        max_attempts=max_attempts,
        force=force,
        dry_run=dry_run,
        unordered=unordered,
    )
