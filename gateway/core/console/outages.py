"""The overview's outage figures: each dependency's state with since when, and the
settlement events in retry by class and dependency (sql/027, written by the worker
processes through `gateway.dependency_watch`).

Plain values and pure functions; the SQL is in `adapters.postgres.dependency_state`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.core.health.dependencies import Dependency, Health

#: An event whose next delivery has been due this long is no longer counted as in retry:
#: no worker has taken it back (a stopped worker shows as a settlement backlog instead).
RETRY_OVERDUE_S = 900.0


@dataclass(frozen=True)
class DependencyBrief:
    """A dependency as the worker processes last reported it; `state` None: none has."""

    dependency: Dependency
    state: Health | None = None
    since: datetime | None = None
    checked_at: datetime | None = None
    checked_by: str | None = None
    error_class: str | None = None

    @property
    def down(self) -> bool:
        return self.state is Health.DOWN


@dataclass(frozen=True)
class RetryBrief:
    """Events in retry with one error class (and the dependency it blames)."""

    error_class: str
    dependency: str | None
    events: int
    oldest_noted_at: datetime
    next_retry_at: datetime


def dependency_briefs(
    rows: Iterable[tuple[str, str, datetime, datetime, str, str | None]],
) -> tuple[DependencyBrief, ...]:
    """Every dependency, in `Dependency`'s order, with its row where there is one
    (`dependency, state, since, checked_at, checked_by, error_class`); a name the enum
    does not know (a newer gateway's) is left out."""
    found = {}
    for name, state, since, checked_at, by, error_class in rows:
        if name in Dependency.__members__.values():
            found[Dependency(name)] = DependencyBrief(
                Dependency(name), Health(state), since, checked_at, by, error_class
            )
    return tuple(found.get(d, DependencyBrief(d)) for d in Dependency)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def outages_json(
    dependencies: Iterable[DependencyBrief], retrying: Iterable[RetryBrief]
) -> dict[str, Any]:
    """The API's part of the overview for them."""
    retries = list(retrying)
    return {
        "dependencies": [
            {
                "dependency": d.dependency.value,
                "state": None if d.state is None else d.state.value,
                "since": _time(d.since),
                "checked_at": _time(d.checked_at),
                "checked_by": d.checked_by,
                "error_class": d.error_class,
            }
            for d in dependencies
        ],
        "in_retry": {
            "total": sum(r.events for r in retries),
            "by_class": [
                {
                    "error_class": r.error_class,
                    "dependency": r.dependency,
                    "events": r.events,
                    "oldest_noted_at": r.oldest_noted_at.isoformat(),
                    "next_retry_at": r.next_retry_at.isoformat(),
                }
                for r in retries
            ],
        },
    }
