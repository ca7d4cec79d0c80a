"""Replaying dead letters: each row's stage runs again in-process, through the handler the
stage table names for it, with the same idempotency as the live path.

1. The rows are planned: unknown ids are refused, resolved rows and rows at
   `--max-attempts` are skipped, rows of a stage with no handler fail (left unchanged).
2. The plan's rows are claimed one at a time, in its order, each in a transaction with
   `FOR UPDATE SKIP LOCKED` and its conditions checked again under the lock, so
   overlapping replays never run a row twice (a row another run holds or finished is
   passed over). The order: each key's rows in `key_seq` order (settlement applies a
   key's events only in that order), then the rows without a key, oldest `received_at`
   first; with `--unordered`, every row oldest first.
3. The handler runs; the row is resolved (`resolution = 'replayed'`) or gets one more
   attempt and the new error, in the same transaction that holds its lock.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from gateway import tracing
from gateway.adapters.postgres import Conn, Pool, connection, transaction
from gateway.adapters.postgres.dead_letters import rows as dead_letters
from gateway.core.dlq.filters import DlqFilter, ReplayOptions
from gateway.core.dlq.model import DlqRow, RowBrief, RowOutcome
from gateway.core.events.model import Failure, Stage
from gateway.core.failures import disposition
from gateway.core.operator_input import pace_delay_s
from gateway.dlq.confirm_handler import confirm_handler
from gateway.dlq.forward_handler import forward_handlers
from gateway.dlq.ingest_handler import ingest_handler
from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers
from gateway.dlq.plan import ReplayPlan, ReplaySummary, RowResult, plan
from gateway.dlq.publish_handler import publish_handler
from gateway.dlq.settlement_handler import settlement_handler
from gateway.dlq.traced import replay_done, replay_span
from gateway.errors import DlqRowNotFound, PayloadRemoved
from gateway.settings.forward import ForwardOptions

#: The stages a replay can run again, and the factory of each one's handler. Read-only:
#: a stage is replayable because it is named here, where a reader can see it, not because
#: some module registered itself on import. Rows of any other stage fail as NO_HANDLER.
STAGE_HANDLERS: StageHandlers = MappingProxyType(
    {
        Stage.INGEST.value: ingest_handler,
        Stage.PUBLISH.value: publish_handler,
        Stage.SETTLEMENT.value: settlement_handler,
        Stage.CONFIRM.value: confirm_handler,
    }
)


#: Called with each claimed row and its result inside the transaction that holds the row's
#: lock and records the outcome: the automatic re-drive counts and audits its replays
#: there, so a replay is never recorded without its count, nor counted without its replay.
RowRecorder = Callable[[Conn, DlqRow, RowResult], Awaitable[None]]


def stage_handlers(forward: Mapping[str, ForwardOptions]) -> StageHandlers:
    """Every stage a replay with these settings can run again: the pipeline's, and each
    `[forward.NAME]` destination's `forward:NAME`."""
    return MappingProxyType({**STAGE_HANDLERS, **forward_handlers(forward)})


class Handlers:
    """The handlers of one replay run, built on first use from the run's table."""

    def __init__(self, ctx: ReplayContext, factories: StageHandlers) -> None:
        self._ctx = ctx
        self._factories = factories
        self._built: dict[str, StageHandler] = {}

    async def get(self, stage: str) -> StageHandler:
        if stage not in self._built:
            self._built[stage] = await self._factories[stage](self._ctx)
        return self._built[stage]


def failure_of(exc: BaseException) -> Failure:
    """How a handler's exception is recorded: as the worker records it, so a replay that
    fails the same way keeps the row's code; a permanent error's message says it all."""
    stack = "".join(traceback.format_exception(exc))
    return disposition.failure_of(exc, stack, permanent_stack=False)


async def replay(
    ctx: ReplayContext,
    f: DlqFilter,
    options: ReplayOptions,
    on_result: Callable[[RowResult], None] = lambda _: None,
    on_plan: Callable[[ReplayPlan], None] = lambda _: None,
    *,
    handlers: StageHandlers = STAGE_HANDLERS,
    record: RowRecorder | None = None,
) -> ReplaySummary:
    """Replay the rows `options.ids` (or those matching `f`) with the stage `handlers`;
    see the module docstring."""
    stages = tuple(sorted(handlers))
    summary = ReplaySummary()
    async with connection(ctx.pool) as conn:
        briefs = await dead_letters.replay_briefs(
            conn, f, options.ids, ordered=not options.unordered
        )
        run_started_at = await dead_letters.clock(conn)
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
    built = Handlers(ctx, handlers)
    started_s = time.monotonic()
    claim = _Claim(f, options, stages, run_started_at, record)
    done = 0
    for brief in the_plan.to_replay:
        await asyncio.sleep(pace_delay_s(started_s, done, options.rate_per_s, time.monotonic()))
        result = await _replay_row(ctx.pool, built, claim, brief.id)
        if result is None:  # taken, or already done, by an overlapping replay
            continue
        done += 1
        on_result(summary.add(result))
    return summary


@dataclass(frozen=True)
class _Claim:
    """Which rows a run claims: the plan's, re-checked under lock at each claim."""

    f: DlqFilter
    options: ReplayOptions
    stages: Sequence[str]
    run_started_at: datetime
    record: RowRecorder | None = None


async def _replay_row(
    pool: Pool, handlers: Handlers, claim: _Claim, row_id: int
) -> RowResult | None:
    """Claim the planned row if it is still replayable and no one else holds it, run its
    stage, record the outcome; None when it was passed over."""
    options = claim.options
    async with transaction(pool) as conn:
        # Claimed by id, in the plan's order: a primary-key look-up, where claiming the
        # first match of the filter in key order would sort every open row each time.
        row = await dead_letters.claim_next(
            conn,
            claim.f,
            (row_id,),
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
        span = replay_span(row)  # None: tracing off, or this replay's trace not sampled
        try:
            with tracing.activated(span):  # the handler's spans and log lines join it
                result = await _run_row(conn, handler, row, brief)
                if claim.record is not None:
                    await claim.record(conn, row, result)
        except BaseException as exc:  # recording the outcome failed: the run's error
            replay_done(span, "error", failure_of(exc).error_class)
            raise
        replay_done(span, result.outcome.value, result.error_class)
        return result


async def _run_row(conn: Conn, handler: StageHandler, row: DlqRow, brief: RowBrief) -> RowResult:
    """Run the row's stage and record the outcome, inside the claim's transaction."""
    try:
        if row.payload_removed_at is not None:
            raise PayloadRemoved(
                f"payload removed at {row.payload_removed_at.isoformat(timespec='seconds')} "
                "by retention: nothing to replay; resolve the row by hand, or have the "
                "provider resend the event"
            )
        await handler(row)
    except Exception as exc:  # any failure of the stage is this row's, not the run's
        failure = failure_of(exc)
        await dead_letters.mark_failed(conn, row.id, failure)
        return RowResult(brief, RowOutcome.FAILED, failure.error_class, failure.message)
    await dead_letters.mark_replayed(conn, row.id)
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
        row.source,
    )
