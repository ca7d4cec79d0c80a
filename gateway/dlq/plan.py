"""What a replay run will do and what it did: the plan made before anything is claimed,
each row's outcome, and the counts the command prints.

Plain values and one pure function, so the CLI and its formatting can use them without
loading the stage handlers (and what they need) until a replay actually runs.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from gateway.core.dlq.filters import ReplayOptions
from gateway.core.dlq.model import RowBrief, RowOutcome
from gateway.errors import ErrorClass

#: The stages a replay can run again: the keys of `gateway.dlq.replay.STAGE_HANDLERS`
#: (a test holds them equal), named here so a planner (the console's) can plan without
#: loading the handlers and the settlement side they import.
REPLAYABLE_STAGES: tuple[str, ...] = ("ingest", "publish", "settlement", "confirm")


@dataclass(frozen=True)
class RowResult:
    """One row's outcome, with the error or the reason it was skipped."""

    row: RowBrief
    outcome: RowOutcome
    error_class: str | None = None
    message: str | None = None


@dataclass
class ReplaySummary:
    """Counts for the final line, and every row's result for `--json`."""

    replayed: int = 0
    failed: int = 0
    skipped: int = 0
    would_replay: int = 0
    results: list[RowResult] = field(default_factory=list)

    def add(self, result: RowResult) -> RowResult:
        setattr(self, result.outcome.value, getattr(self, result.outcome.value) + 1)
        self.results.append(result)
        return result


@dataclass(frozen=True)
class ReplayPlan:
    """What a run will do before it claims anything."""

    to_replay: list[RowBrief]  # in replay order, at most --limit
    results: list[RowResult]  # decided without running anything: skipped, no handler


def plan(briefs: list[RowBrief], stages: Collection[str], options: ReplayOptions) -> ReplayPlan:
    """Sort the considered rows into replayable, skipped and unreplayable (pure)."""
    to_replay: list[RowBrief] = []
    results: list[RowResult] = []
    for brief in briefs:
        if brief.is_resolved:
            why = f"already resolved ({brief.resolution or 'resolved'})"
            results.append(RowResult(brief, RowOutcome.SKIPPED, None, why))
        elif brief.stage not in stages:
            why = f"no handler for stage {brief.stage}; row left unchanged"
            results.append(RowResult(brief, RowOutcome.FAILED, ErrorClass.NO_HANDLER, why))
        elif brief.attempts >= options.max_attempts and not options.force:
            why = f"{brief.attempts} attempts reached --max-attempts {options.max_attempts}"
            results.append(RowResult(brief, RowOutcome.SKIPPED, None, why + "; --force to include"))
        elif options.limit is None or len(to_replay) < options.limit:
            to_replay.append(brief)
    return ReplayPlan(to_replay, results)
