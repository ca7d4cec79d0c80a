"""What an operator asked the DLQ commands for: times, filters and replay flags, checked.

Pure: `now` is passed in, nothing is read from the clock or the database. Every problem
is a `DlqUsageError` whose message is the one line the operator sees.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gateway.core.model import Stage
from gateway.errors import DlqUsageError

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_duration_s(text: str) -> float | None:
    """`90s`, `30m`, `2h`, `1d`, `1w` or a sum like `1h30m` in seconds; None if not one."""
    compact = text.strip().lower()
    if not compact or _DURATION.sub("", compact):
        return None
    return float(sum(int(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(compact)))


def parse_instant(text: str, now: datetime, flag: str) -> datetime:
    """An absolute time (`2026-11-30T10:00Z`, with an offset) or a duration ago (`2h`).

    A date alone means midnight UTC. A date and time without a zone is refused: at 3 a.m.
    nobody should have to guess whether the gateway read it as local time or UTC.
    """
    ago_s = parse_duration_s(text)
    if ago_s is not None:
        try:
            return now - timedelta(seconds=ago_s)
        except OverflowError:
            raise DlqUsageError(f"{flag}: {text!r} reaches before year 1") from None
    value = text.strip()
    if _DATE_ONLY.fullmatch(value):
        value += "T00:00Z"
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise DlqUsageError(
            f"{flag}: cannot read {text!r}; use a time like 2026-11-30T10:00Z "
            "or a duration ago like 30m, 2h, 1d"
        ) from None
    if parsed.tzinfo is None:
        raise DlqUsageError(f"{flag}: {text!r} has no time zone; add Z (UTC) or an offset (+01:00)")
    return parsed.astimezone(UTC)


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
    start = parse_instant(since, now, "--since") if since else None
    end = parse_instant(until, now, "--until") if until else None
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


#: The largest row id: the tables' ids are PostgreSQL `bigint`.
MAX_ROW_ID = 2**63 - 1


def parse_ids(texts: Sequence[str], flag: str = "--id") -> tuple[int, ...]:
    """Row ids as typed (positive integers, repeats removed, order kept)."""
    ids: list[int] = []
    for text in texts:
        value = text.strip().lstrip("#")
        # ASCII digits only (`isdigit` also admits `²`, which `int` refuses), and within
        # the tables' bigint ids: a longer number is refused here, not by the database.
        digits = value.lstrip("0") if value.isascii() and value.isdigit() else ""
        if not (0 < len(digits) <= 19 and int(digits) <= MAX_ROW_ID):
            shown = text if len(text) <= 24 else text[:24] + "..."
            raise DlqUsageError(
                f"{flag}: {shown!r} is not a row id (a whole number from 1 to {MAX_ROW_ID})"
            )
        ids.append(int(digits))
    return tuple(dict.fromkeys(ids))


@dataclass(frozen=True)
class ReplayOptions:
    """How a replay runs: which rows, how fast, and what counts as given up."""

    ids: tuple[int, ...] = ()
    limit: int | None = None
    rate_per_s: float | None = None
    max_attempts: int = 5
    force: bool = False
    dry_run: bool = False


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
    return ReplayOptions(
        ids=parse_ids(ids),
        limit=limit,
        rate_per_s=rate_per_s,
        max_attempts=max_attempts,
        force=force,
        dry_run=dry_run,
    )


def pace_delay_s(started_s: float, done: int, rate_per_s: float | None, now_s: float) -> float:
    """How long to wait before the next row so that `done` rows take `done / rate` seconds.

    Measured from the start rather than from the last row, so a slow row is made up for
    by the next ones and the average rate holds.
    """
    if rate_per_s is None:
        return 0.0
    return max(0.0, started_s + done / rate_per_s - now_s)


def format_age(seconds: float) -> str:
    """A compact age for tables: `42s`, `5m`, `2h05m`, `3d04h`."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"
