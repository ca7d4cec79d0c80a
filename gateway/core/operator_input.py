"""What an operator types on the command line, read and checked: instants, durations,
row ids, and the pacing a `--rate` asks for.

Shared by `gateway dlq`, `gateway events` and `gateway backfill`, so `--since 2h` and
`--id 412` mean the same in each. Pure: `now` is passed in, nothing is read from the
clock or the database. Every problem is a `UsageError` whose message is the one line
the operator sees (the commands' own subclasses wrap it where they need their own).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from gateway.errors import UsageError

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")

#: The largest row id: the tables' ids are PostgreSQL `bigint`.
MAX_ROW_ID = 2**63 - 1


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
            raise UsageError(f"{flag}: {text!r} reaches before year 1") from None
    value = text.strip()
    if _DATE_ONLY.fullmatch(value):
        value += "T00:00Z"
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise UsageError(
            f"{flag}: cannot read {text!r}; use a time like 2026-11-30T10:00Z "
            "or a duration ago like 30m, 2h, 1d"
        ) from None
    if parsed.tzinfo is None:
        raise UsageError(f"{flag}: {text!r} has no time zone; add Z (UTC) or an offset (+01:00)")
    return parsed.astimezone(UTC)


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
            raise UsageError(
                f"{flag}: {shown!r} is not a row id (a whole number from 1 to {MAX_ROW_ID})"
            )
        ids.append(int(digits))
    return tuple(dict.fromkeys(ids))


def pace_delay_s(started_s: float, done: int, rate_per_s: float | None, now_s: float) -> float:
    """How long to wait before the next item so that `done` items take `done / rate` seconds.

    Measured from the start rather than from the last item, so a slow item is made up for
    by the next ones and the average rate holds.
    """
    if rate_per_s is None:
        return 0.0
    return max(0.0, started_s + done / rate_per_s - now_s)
