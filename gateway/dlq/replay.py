"""Replaying dead letters: each row's stage runs again in-process, through a handler
registered for that stage, with the same idempotency as the live path.

1. The rows are planned: unknown ids are refused, resolved rows and rows at
   `--max-attempts` are skipped, rows of a stage with no handler fail (left unchanged).
2. Each remaining row is claimed alone, in a transaction, with `FOR UPDATE SKIP LOCKED`,
   oldest `received_at` first, so overlapping replays never run a row twice.
3. The handler runs; the row is resolved (`resolution = 'replayed'`) or gets one more
   attempt and the new error, in the same transaction that holds its lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import importlib
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import asyncpg

from gateway.adapters import dlq_store
from gateway.adapters.postgres import connection
from gateway.core.dlq_filters import DlqFilter, ReplayOptions, pace_delay_s
from gateway.core.dlq_model import DlqRow, RowBrief
from gateway.core.model import Failure
from gateway.errors import DlqRowNotFound, GatewayError, PermanentError
from gateway.metrics import Metrics
from gateway.settings import Settings


class StageHandler(Protocol):
    """Runs one stage again for one dead-letter row; returns on success, raises on failure.

    A handler must be idempotent (a replayed effect that already happened is a no-op)
    and must not write to `dlq_webhooks` itself: the replayer holds the row's lock and
    records the outcome, so a handler updating the row from another connection would
    wait for that lock for ever.
    """

    async def __call__(self, row: DlqRow) -> None: ...


@dataclass
class ReplayContext:
    """What a handler factory may use; clients it opens go on `resources` to be closed."""

    settings: Settings
    pool: asyncpg.Pool
    metrics: Metrics
    resources: contextlib.AsyncExitStack


HandlerFactory = Callable[[ReplayContext], Awaitable[StageHandler]]

_FACTORIES: dict[str, HandlerFactory] = {}
# Modules that register the handler of their own stage when imported.
_HANDLER_MODULES = ("gateway.dlq.ingest_handler", "gateway.dlq.settlement_handler")


def register_stage_handler_factory(stage: str, factory: HandlerFactory) -> None:
    """Build the handler for `stage` with `factory` when a replay first needs it."""
    _FACTORIES[stage] = factory


def register_stage_handler(stage: str, handler: StageHandler) -> None:
    """Replay `stage` rows with a ready-made handler (it needs no clients of the run's)."""

    async def ready(_: ReplayContext) -> StageHandler:
        return handler

    _FACTORIES[stage] = ready


def unregister_stage_handler(stage: str) -> None:
    """Forget the handler of `stage` (tests)."""
    _FACTORIES.pop(stage, None)


def registered_stages() -> tuple[str, ...]:
    """The stages some handler replays, after the handler modules had their say."""
    for name in _HANDLER_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # the module exists but something it needs does not
                raise
    return tuple(sorted(_FACTORIES))


class Handlers:
    """The handlers of one replay run, built on first use and closed when the run ends."""

    def __init__(self, ctx: ReplayContext) -> None:
        self._ctx = ctx
        self._built: dict[str, StageHandler] = {}

    async def get(self, stage: str) -> StageHandler:
        if stage not in self._built:
            self._built[stage] = await _FACTORIES[stage](self._ctx)
        return self._built[stage]


class RowOutcome(enum.StrEnum):
    """What a replay did with one row."""

    REPLAYED = "replayed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WOULD_REPLAY = "would_replay"  # dry run


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


def failure_of(exc: BaseException) -> Failure:
    """How a handler's exception is recorded: its class name in our tree, else unexpected."""
    stack = "".join(traceback.format_exception(exc))
    if isinstance(exc, PermanentError):  # the message says it all; no stack needed
        return Failure(exc.error_class, str(exc) or type(exc).__name__)
    if isinstance(exc, GatewayError):
        return Failure(exc.error_class, str(exc) or type(exc).__name__, stack)
    return Failure("UNEXPECTED_ERROR", f"{type(exc).__name__}: {exc}", stack)


@dataclass(frozen=True)
class ReplayPlan:
    """What a run will do before it claims anything."""

    to_replay: list[RowBrief]  # in replay order, at most --limit
    results: list[RowResult]  # decided without running anything: skipped, no handler


def plan(briefs: list[RowBrief], stages: tuple[str, ...], options: ReplayOptions) -> ReplayPlan:
    """Sort the considered rows into replayable, skipped and unreplayable (pure)."""
    to_replay: list[RowBrief] = []
    results: list[RowResult] = []
    for brief in briefs:
        if brief.is_resolved:
            why = f"already resolved ({brief.resolution or 'resolved'})"
            results.append(RowResult(brief, RowOutcome.SKIPPED, None, why))
        elif brief.stage not in stages:
            why = f"no handler for stage {brief.stage}; row left unchanged"
            results.append(RowResult(brief, RowOutcome.FAILED, "NO_HANDLER", why))
        elif brief.attempts >= options.max_attempts and not options.force:
            why = f"{brief.attempts} attempts reached --max-attempts {options.max_attempts}"
            results.append(RowResult(brief, RowOutcome.SKIPPED, None, why + "; --force to include"))
        elif options.limit is None or len(to_replay) < options.limit:
            to_replay.append(brief)
    return ReplayPlan(to_replay, results)


async def replay(
    ctx: ReplayContext,
    f: DlqFilter,
    options: ReplayOptions,
    on_result: Callable[[RowResult], None] = lambda _: None,
    on_plan: Callable[[ReplayPlan], None] = lambda _: None,
) -> ReplaySummary:
    """Replay the rows `options.ids` (or those matching `f`); see the module docstring."""
    stages = registered_stages()
    summary = ReplaySummary()
    async with connection(ctx.pool) as conn:
        briefs = await dlq_store.replay_briefs(conn, f, options.ids)
        run_started_at = await dlq_store.clock(conn)
    missing = sorted(set(options.ids) - {b.id for b in briefs})
    if missing:
        raise DlqRowNotFound(missing)
    the_plan = plan(briefs, stages, options)
    for decided in the_plan.results:
        on_result(summary.add(decided))
    on_plan(the_plan)  # every result after this one is a row of `to_replay`
    if options.dry_run:
        for brief in the_plan.to_replay:
            on_result(summary.add(RowResult(brief, RowOutcome.WOULD_REPLAY)))
        return summary
    handlers = Handlers(ctx)
    started_s = time.monotonic()
    claim = _Claim(f, options, stages, run_started_at)
    for done in range(len(the_plan.to_replay)):
        await asyncio.sleep(pace_delay_s(started_s, done, options.rate_per_s, time.monotonic()))
        result = await _replay_next(ctx.pool, handlers, claim)
        if result is None:  # the rest were taken by an overlapping replay
            break
        on_result(summary.add(result))
    return summary


@dataclass(frozen=True)
class _Claim:
    """Which rows a run claims: the plan's, re-checked under lock at each claim."""

    f: DlqFilter
    options: ReplayOptions
    stages: Sequence[str]
    run_started_at: datetime


async def _replay_next(pool: asyncpg.Pool, handlers: Handlers, claim: _Claim) -> RowResult | None:
    """Claim the oldest planned row still open, run its stage, record the outcome."""
    options = claim.options
    async with connection(pool) as conn, conn.transaction():
        # With --all the filter is claimed again rather than the plan's ids: sending a
        # long id list with every claim would cost more than the rows themselves.
        row = await dlq_store.claim_next(
            conn,
            claim.f,
            options.ids,
            claim.stages,
            max_attempts=None if options.force else options.max_attempts,
            run_started_at=claim.run_started_at,
        )
        if row is None:
            return None
        brief = _brief(row)
        # Outside the try: a handler that cannot be built (its ledger is down, say) is the
        # run's failure, not this row's; the transaction rolls back and the row stays.
        handler = await handlers.get(row.stage)
        try:
            await handler(row)
        except Exception as exc:  # any failure of the stage is this row's, not the run's
            failure = failure_of(exc)
            await dlq_store.mark_failed(conn, row.id, failure)
            return RowResult(brief, RowOutcome.FAILED, failure.error_class, failure.message)
        await dlq_store.mark_replayed(conn, row.id)
        return RowResult(brief, RowOutcome.REPLAYED)


def _brief(row: DlqRow) -> RowBrief:
    return RowBrief(
        row.id,
        row.stage,
        row.provider,
        row.event_id,
        row.subject,
        row.error_class,
        row.attempts,
        row.received_at,
        row.first_failed_at,
        row.last_failed_at,
        row.is_resolved,
        row.resolution,
    )
