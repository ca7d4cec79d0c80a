"""What the console's audit page (and its NDJSON export) was asked for: who, what, on
which target, with which outcome, inside a time window, a page at a time.

Pure: `now` is passed in. Every problem is an `AuditUsageError` whose message is the
one line the user sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.core.events.search import PAGE_MAX, parse_limit, window
from gateway.core.keyset import Keyset, decode_cursor
from gateway.core.operator_input import parse_instant
from gateway.errors import UsageError

#: The outcomes `console_audit.outcome` holds.
OUTCOMES = ("ok", "refused", "failed")
#: The page's window when none is given: a week of the trail.
AUDIT_WINDOW_DEFAULT = timedelta(days=7)
#: The widest window one page or one export reads.
AUDIT_WINDOW_MAX = timedelta(days=31)
#: A filter value longer than this matches nothing the console writes.
VALUE_MAX_CHARS = 200


class AuditUsageError(UsageError):
    """An audit filter that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class AuditSearch:
    """Which audit rows: every text filter exact, or a prefix when it ends in `*`."""

    since: datetime
    until: datetime
    actor: str | None = None
    action: str | None = None
    target: str | None = None
    outcome: str | None = None
    after: Keyset | None = None
    limit: int = 50

    def query(self) -> list[tuple[str, str]]:
        """The search as query parameters (without the cursor), times absolute."""
        pairs = [(name, value) for name, value in self._texts() if value is not None]
        pairs.append(("since", self.since.isoformat().replace("+00:00", "Z")))
        pairs.append(("until", self.until.isoformat().replace("+00:00", "Z")))
        return pairs

    def _texts(self) -> list[tuple[str, str | None]]:
        return [
            ("actor", self.actor),
            ("action", self.action),
            ("target", self.target),
            ("outcome", self.outcome),
        ]


def _one(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = [v.strip() for v in params.get(name, ()) if v.strip()]
    if len(values) > 1:
        raise AuditUsageError(f"{name}: give it once")
    if values and len(values[0]) > VALUE_MAX_CHARS:
        raise AuditUsageError(f"{name}: at most {VALUE_MAX_CHARS} characters")
    return values[0] if values else None


def like_prefix(value: str) -> str | None:
    """`dlq.*` as a LIKE pattern (its own `%`, `_` and `\\` taken literally), or None
    when the value is exact."""
    if not value.endswith("*"):
        return None
    stem = value[:-1]
    return stem.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def parse_audit_search(
    params: Mapping[str, Sequence[str]], now: datetime, *, page_max: int = PAGE_MAX
) -> AuditSearch:
    since_text, until_text = _one(params, "since"), _one(params, "until")
    try:
        since = parse_instant(since_text, now, "since") if since_text else None
        until = parse_instant(until_text, now, "until") if until_text else None
        if since is not None and until is not None and since >= until:
            raise AuditUsageError("since must be earlier than until")
        since, until = window(since, until, now, AUDIT_WINDOW_DEFAULT, AUDIT_WINDOW_MAX)
        cursor = _one(params, "cursor")
        after = decode_cursor(cursor) if cursor else None
        limit = parse_limit(_one(params, "limit"))
    except UsageError as exc:  # the shared syntax, reported as this page's mistake
        raise AuditUsageError(str(exc)) from None
    outcome = _one(params, "outcome")
    if outcome is not None and outcome not in OUTCOMES:
        raise AuditUsageError(f"outcome: {outcome!r} is not one of {', '.join(OUTCOMES)}")
    return AuditSearch(
        since=since,
        until=until,
        actor=_one(params, "actor"),
        action=_one(params, "action"),
        target=_one(params, "target"),
        outcome=outcome,
        after=after,
        limit=min(limit, page_max),
    )
