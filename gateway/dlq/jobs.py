"""Running replay jobs (`gateway dlq run-jobs`): the console plans a replay as a
`replay_jobs` row with its items; a runner claims the job and replays each item with the
same code as the commands, `gateway dlq replay` for dead letters and `gateway events
replay` for accepted events, one item at a time in the plan's order.

1. Claim the oldest runnable job: planned, or running under a runner whose heartbeat is
   stale (`core.replay.jobs.may_take`): a killed runner's job is taken again.
2. Before each item, renew the heartbeat; a job no longer running under this runner
   (paused, cancelled, taken over) is left at once, so pause and cancel take effect
   within one item. A background beat keeps a slow item's job from looking dead.
3. Take the job's first pending item under a row lock (`replay_jobs.take_next`), held
   while the item runs and until its outcome is recorded. A runner that took the job
   over while the one before it still runs an item (a pause and a resume during a slow
   item) waits for that item's outcome rather than passing over it: a job's items run one
   at a time, in order, and every outcome is recorded by the runner that ran the item.
4. Replay the item: a dead letter through `gateway.dlq.replay.replay` with that one id
   (its claim re-checks the row under lock, so an item a killed runner had half done is
   skipped as resolved, never replayed twice); an event through `replay_events`. A row
   another replay (`gateway dlq replay`) holds stays pending and is tried again shortly.
   An error replaying one row fails that item, and the job goes on with the next.
5. With no pending item left, finish the job: failed if any item failed, else done. A
   run that cannot go on (a handler cannot be built, NATS is away) fails the job with the
   reason, its remaining items pending, for "retry" to continue. Any other error of a
   job fails that job with the reason, and the runner goes on with the next job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gateway.adapters.jetstream.one_shot import OneShotPublisher
from gateway.adapters.postgres import Pool, connection, transaction
from gateway.adapters.postgres import replay_jobs as store
from gateway.core.dlq.filters import DlqFilter, ReplayOptions
from gateway.core.events.filters import EventFilter
from gateway.core.failures.disposition import failure_of
from gateway.core.operator_input import pace_delay_s
from gateway.core.replay.jobs import (
    HEARTBEAT_S,
    STALE_AFTER_S,
    ItemState,
    JobItem,
    JobKind,
    JobState,
    ReplayJob,
    finished_state,
    item_state,
)
from gateway.dlq.auto_replay import auto_replayer
from gateway.errors import DatabaseError, DatabaseUnavailable, RowNotFound

if TYPE_CHECKING:
    from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerOptions:
    """How a runner runs; the intervals are seams for tests."""

    once: bool = False  # run what is runnable now, then return
    poll_s: float = 2.0
    heartbeat_s: float = HEARTBEAT_S
    stale_after_s: float = STALE_AFTER_S
    name: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    )


@dataclass(frozen=True)
class ItemOutcome:
    """What became of one item."""

    state: ItemState
    error_class: str | None = None
    message: str | None = None


#: An item that cannot run now stays pending and is tried again after the poll interval:
#: another runner still runs it, or another replay holds its row. (Each is logged once.)
WAIT_RUNNER = "waits: another runner is running the job's next item"
WAIT_ROW = "waits: another replay holds the next item's row"
#: The job is no longer this runner's (paused, cancelled, taken over).
LOST = "lost"


class RunStopped(Exception):
    """The run of a job cannot go on (the item is left pending): the job fails with this
    message. Control flow inside this module, never raised out of it, so not a member of
    the `gateway.errors` tree (whose classes are stored codes)."""


def _run_level(factories: StageHandlers) -> StageHandlers:
    """The stage handlers' factories, a failure to build one raised as `RunStopped`: a
    handler that cannot be built (its ledger is down) stops the run, where an error
    replaying one row fails that row's item."""

    def wrapped(factory: Callable[[ReplayContext], Awaitable[StageHandler]]) -> Any:
        async def build(ctx: ReplayContext) -> StageHandler:
            try:
                return await factory(ctx)
            except DatabaseUnavailable:
                raise
            except Exception as exc:
                log.warning("replay job: a stage handler cannot be built", exc_info=True)
                raise RunStopped(f"{type(exc).__name__}: {exc}") from exc

        return build

    built: Mapping[str, Any] = {stage: wrapped(f) for stage, f in factories.items()}
    return MappingProxyType(built)


@dataclass
class JobRunner:
    """One runner process: the replay resources of `gateway dlq replay` and the publisher
    of `gateway events replay`, opened once for all the jobs it runs."""

    ctx: ReplayContext
    publisher: OneShotPublisher
    options: RunnerOptions
    #: The items' locks, each held while its item runs: a pool of their own, so the
    #: replay's handlers keep the replay pool's connections.
    claims: Pool

    @property
    def pool(self) -> Pool:
        return self.ctx.pool

    async def run(self) -> int:
        """Claim and run jobs until cancelled (or, with `once`, until none is runnable);
        the number of jobs run. Beside the jobs, unless `once` or `[dlq] auto_replay =
        false`, the automatic re-drive of dead letters (`gateway.dlq.auto_replay`) runs
        its rounds on the same replay resources."""
        if self.options.once or not self.ctx.settings.dlq.auto_replay:
            return await self._run_jobs()
        async with auto_replayer(self.ctx) as auto:
            redrive = asyncio.create_task(auto.run())
            try:
                return await self._run_jobs()
            finally:
                redrive.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await redrive

    async def _run_jobs(self) -> int:
        log.info("replay job runner started", extra={"runner": self.options.name})
        ran = 0
        while True:
            try:
                async with transaction(self.pool) as conn:
                    job = await store.claim_job(conn, self.options.name, self.options.stale_after_s)
                if job is not None:
                    ran += 1
                    await self.run_job(job)
                    continue
            except DatabaseUnavailable as exc:
                # The job keeps its state; its heartbeat goes stale and it is taken again.
                log.warning("replay jobs: database unavailable", extra={"error": str(exc)})
                if self.options.once:
                    raise
            except DatabaseError:  # claiming failed (a job's own errors end in run_job)
                log.exception("replay jobs: claiming a job failed")
                if self.options.once:
                    raise
            if self.options.once:
                return ran
            await asyncio.sleep(self.options.poll_s)

    async def run_job(self, job: ReplayJob) -> None:
        """Run the job's pending items in order, then finish it (see the module docstring).
        An error other than the database being away fails this job, not the runner."""
        extra = {"job_id": job.id, "kind": job.kind.value, "total": job.total}
        log.info("replay job claimed", extra={**extra, "runner": self.options.name})
        beat = asyncio.create_task(self._beat(job.id))
        try:
            why = await self._items(job)
        except DatabaseUnavailable:
            raise
        except Exception as exc:
            log.exception("replay job failed", extra=extra)
            why = await self._fail_for(job, f"{type(exc).__name__}: {exc}")
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        log.info("replay job left", extra={**extra, "outcome": why})

    async def _items(self, job: ReplayJob) -> str:
        started_s = time.monotonic()
        done = 0
        waited: str | None = None
        while True:
            async with connection(self.pool) as conn:
                item = await store.next_pending(conn, job.id)
            if item is None:
                return await self._finish(job)
            delay_s = pace_delay_s(started_s, done, job.rate_per_s, time.monotonic())
            if not await self._still_ours(job.id, delay_s):
                return "stopped: paused, cancelled or taken over"
            try:
                step = await self._next_item(job)
            except RunStopped as exc:
                return await self._fail(job, str(exc))
            if step == LOST:
                return "stopped: paused, cancelled or taken over"
            if step in (WAIT_RUNNER, WAIT_ROW):
                if step != waited:
                    log.info(f"replay job {step}", extra={"job_id": job.id, "row_id": item.row_id})
                waited = step
                await asyncio.sleep(self.options.poll_s)
                continue
            waited = None
            done += 1

    async def _next_item(self, job: ReplayJob) -> str:
        """Take the job's first pending item, replay it and record its outcome, all under
        the item's lock; `WAIT_RUNNER` or `WAIT_ROW` when it cannot run now, `LOST` when
        the job is no longer this runner's, else the item's outcome."""
        async with transaction(self.claims) as conn:
            item = await store.take_next(conn, job.id)
            if item is None:  # another runner still runs it (or it was just recorded)
                return WAIT_RUNNER
            if not await store.runs(conn, job.id, self.options.name):
                return LOST
            outcome = await self._replay(job, item)
            if outcome is None:
                return WAIT_ROW
            await store.record_item(
                conn, job.id, item.position, outcome.state, outcome.error_class, outcome.message
            )
        # Each failure or skip is worth a line; a replayed row only when debugging.
        level = logging.DEBUG if outcome.state is ItemState.REPLAYED else logging.INFO
        log.log(
            level,
            "replay job item",
            extra={
                "job_id": job.id,
                "position": item.position,
                "row_id": item.row_id,
                "outcome": outcome.state.value,
                "error_class": outcome.error_class,
            },
        )
        return outcome.state.value

    async def _still_ours(self, job_id: int, delay_s: float) -> bool:
        """Wait `delay_s` (the pacing), renewing the heartbeat and looking at the job's
        state at least every heartbeat interval: a pause during a slow rate's wait takes
        effect then, not after it. False once the job is no longer this runner's."""
        deadline_s = time.monotonic() + delay_s
        while True:
            async with connection(self.pool) as conn:
                if not await store.heartbeat(conn, job_id, self.options.name):
                    return False
            left_s = deadline_s - time.monotonic()
            if left_s <= 0:
                return True
            await asyncio.sleep(min(left_s, self.options.heartbeat_s))

    async def _replay(self, job: ReplayJob, item: JobItem) -> ItemOutcome | None:
        """The item's outcome; None when its row is held by another replay (it stays
        pending). `RunStopped` when the run cannot go on; any other error is this row's:
        the item fails with it."""
        try:
            if job.kind is JobKind.EVENTS:
                return await self._replay_event(item.row_id)
            return await self._replay_dead_letter(job, item.row_id)
        except (RunStopped, DatabaseUnavailable):
            raise
        except RowNotFound as exc:  # removed since it was planned (retention)
            return ItemOutcome(ItemState.FAILED, exc.error_class.value, str(exc))
        except Exception as exc:  # replaying this row failed: its outcome, not the run's
            log.exception("replay job item failed", extra={"job_id": job.id, "row_id": item.row_id})
            failure = failure_of(exc, "", permanent_stack=False)
            return ItemOutcome(ItemState.FAILED, failure.error_class, failure.message)

    async def _replay_dead_letter(self, job: ReplayJob, row_id: int) -> ItemOutcome | None:
        # Imported here, as `gateway dlq replay` does: the stage handlers load the
        # settlement side, which the rest of the CLI must not.
        from gateway.dlq import replay as replay_mod

        options = ReplayOptions(
            ids=(row_id,),
            max_attempts=job.max_attempts,
            force=job.force,
            unordered=not job.ordered,
        )
        summary = await replay_mod.replay(
            self.ctx,
            DlqFilter(resolved=None),
            options,
            handlers=_run_level(replay_mod.stage_handlers(self.ctx.settings.forward)),
        )
        if not summary.results:  # another replay holds it, or tried it since this one began
            return None
        result = summary.results[-1]
        return ItemOutcome(item_state(result.outcome.value), result.error_class, result.message)

    async def _replay_event(self, webhook_id: int) -> ItemOutcome:
        from gateway.events.replay import Outcome, ReplayRun, replay_events

        summary = await replay_events(
            self.pool, self.publisher, EventFilter(ids=(webhook_id,)), ReplayRun()
        )
        if summary.stopped:  # NATS is away: every next item would fail the same way
            raise RunStopped(f"stopped at event {webhook_id}: {summary.stopped}")
        if not summary.results:
            return ItemOutcome(ItemState.SKIPPED, None, "no such event")
        result = summary.results[-1]
        if result.outcome is Outcome.WOULD_REPLAY:  # pragma: no cover (never a dry run)
            raise RuntimeError("a job's replay ran as a dry run")
        return ItemOutcome(item_state(result.outcome.value), None, result.message)

    async def _finish(self, job: ReplayJob) -> str:
        async with transaction(self.pool) as conn:
            counts = (await store.progress(conn, [job.id]))[job.id]
            state = finished_state(counts)
            error = f"{counts.failed} of {counts.total} items failed" if counts.failed else None
            if not await store.finish(conn, job.id, self.options.name, state, error):
                return "stopped: paused, cancelled or taken over"
        return state.value

    async def _fail(self, job: ReplayJob, error: str) -> str:
        async with transaction(self.pool) as conn:
            await store.finish(conn, job.id, self.options.name, JobState.FAILED, error)
        return f"failed: {error}"

    async def _fail_for(self, job: ReplayJob, error: str) -> str:
        """Fail the job after an unexpected error, if the database lets it; if not, the
        job is left running, its heartbeat goes stale and a runner takes it again."""
        try:
            return await self._fail(job, error)
        except Exception:
            log.exception("replay job could not be marked failed", extra={"job_id": job.id})
            return f"left running: {error}"

    async def _beat(self, job_id: int) -> None:
        """Keep the job's heartbeat fresh while a slow item runs."""
        while True:
            await asyncio.sleep(self.options.heartbeat_s)
            try:
                async with connection(self.pool) as conn:
                    await store.heartbeat(conn, job_id, self.options.name)
            except DatabaseUnavailable:
                continue  # the next beat tries again; a long outage lets the job go stale
