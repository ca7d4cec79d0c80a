"""Running replay jobs (`gateway dlq run-jobs`): the console plans a replay as a
`replay_jobs` row with its items; a runner claims the job and replays each item with the
same code as the commands, `gateway dlq replay` for dead letters and `gateway events
replay` for accepted events, one item at a time in the plan's order.

1. Claim the oldest runnable job: planned, or running under a runner whose heartbeat is
   stale (`core.replay_jobs.may_take`): a killed runner's job is taken again.
2. Before each item, renew the heartbeat; a job no longer running under this runner
   (paused, cancelled, taken over) is left at once, so pause and cancel take effect
   within one item. A background beat keeps a slow item's job from looking dead.
3. Replay the item: a dead letter through `gateway.dlq.replay.replay` with that one id
   (its claim re-checks the row under lock, so an item a killed runner had half done is
   skipped as resolved, never replayed twice); an event through `replay_events`. Record
   the outcome; items already recorded are never run again.
4. With no pending item left, finish the job: failed if any item failed, else done. A
   run that cannot go on (a handler cannot be built, NATS is away) fails the job with the
   reason, its remaining items pending, for "retry" to continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.adapters.jetstream.one_shot import OneShotPublisher, open_one_shot_publisher
from gateway.adapters.postgres import Pool, connection, transaction
from gateway.adapters.postgres import replay_jobs as store
from gateway.compose import ops
from gateway.core.dlq_filters import DlqFilter, ReplayOptions
from gateway.core.event_filters import EventFilter
from gateway.core.operator_input import pace_delay_s
from gateway.core.replay_jobs import (
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
from gateway.errors import DatabaseUnavailable, RowNotFound
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.dlq.parts import ReplayContext

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


class RunStopped(Exception):
    """The run of a job cannot go on (the item is left pending): the job fails with this
    message. Control flow inside this module, never raised out of it, so not a member of
    the `gateway.errors` tree (whose classes are stored codes)."""


@dataclass
class JobRunner:
    """One runner process: the replay resources of `gateway dlq replay` and the publisher
    of `gateway events replay`, opened once for all the jobs it runs."""

    ctx: ReplayContext
    publisher: OneShotPublisher
    options: RunnerOptions

    @property
    def pool(self) -> Pool:
        return self.ctx.pool

    async def run(self) -> int:
        """Claim and run jobs until cancelled (or, with `once`, until none is runnable);
        the number of jobs run."""
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
            if self.options.once:
                return ran
            await asyncio.sleep(self.options.poll_s)

    async def run_job(self, job: ReplayJob) -> None:
        """Run the job's pending items in order, then finish it (see the module docstring)."""
        extra = {"job_id": job.id, "kind": job.kind.value, "total": job.total}
        log.info("replay job claimed", extra={**extra, "runner": self.options.name})
        beat = asyncio.create_task(self._beat(job.id))
        try:
            why = await self._items(job)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        log.info("replay job left", extra={**extra, "outcome": why})

    async def _items(self, job: ReplayJob) -> str:
        started_s = time.monotonic()
        done = 0
        while True:
            async with connection(self.pool) as conn:
                item = await store.next_pending(conn, job.id)
            if item is None:
                return await self._finish(job)
            delay_s = pace_delay_s(started_s, done, job.rate_per_s, time.monotonic())
            if not await self._still_ours(job.id, delay_s):
                return "stopped: paused, cancelled or taken over"
            try:
                outcome = await self._replay(job, item)
            except RunStopped as exc:
                return await self._fail(job, str(exc))
            except DatabaseUnavailable:
                raise
            except Exception as exc:  # the run's failure (a handler that cannot be built)
                log.exception("replay job failed", extra={"job_id": job.id})
                return await self._fail(job, f"{type(exc).__name__}: {exc}")
            async with connection(self.pool) as conn:
                await store.record_item(
                    conn, job.id, item.position, outcome.state, outcome.error_class, outcome.message
                )
            done += 1
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

    async def _replay(self, job: ReplayJob, item: JobItem) -> ItemOutcome:
        if job.kind is JobKind.EVENTS:
            return await self._replay_event(item.row_id)
        return await self._replay_dead_letter(job, item.row_id)

    async def _replay_dead_letter(self, job: ReplayJob, row_id: int) -> ItemOutcome:
        # Imported here, as `gateway dlq replay` does: the stage handlers load the
        # settlement side, which the rest of the CLI must not.
        from gateway.dlq import replay as replay_mod

        options = ReplayOptions(
            ids=(row_id,),
            max_attempts=job.max_attempts,
            force=job.force,
            unordered=not job.ordered,
        )
        try:
            summary = await replay_mod.replay(
                self.ctx, DlqFilter(resolved=None), options, handlers=replay_mod.STAGE_HANDLERS
            )
        except RowNotFound as exc:  # removed since it was planned (retention)
            return ItemOutcome(ItemState.FAILED, exc.error_class.value, str(exc))
        if not summary.results:  # another replay held it, or tried it since this one began
            return ItemOutcome(ItemState.SKIPPED, None, "taken by an overlapping replay")
        result = summary.results[-1]
        return ItemOutcome(item_state(result.outcome.value), result.error_class, result.message)

    async def _replay_event(self, webhook_id: int) -> ItemOutcome:
        from gateway.events.replay import Outcome, ReplayRun, replay_events

        try:
            summary = await replay_events(
                self.pool, self.publisher, EventFilter(ids=(webhook_id,)), ReplayRun()
            )
        except RowNotFound as exc:
            return ItemOutcome(ItemState.FAILED, exc.error_class.value, str(exc))
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

    async def _beat(self, job_id: int) -> None:
        """Keep the job's heartbeat fresh while a slow item runs."""
        while True:
            await asyncio.sleep(self.options.heartbeat_s)
            try:
                async with connection(self.pool) as conn:
                    await store.heartbeat(conn, job_id, self.options.name)
            except DatabaseUnavailable:
                continue  # the next beat tries again; a long outage lets the job go stale


@contextlib.asynccontextmanager
async def job_runner(settings: Settings, options: RunnerOptions) -> AsyncIterator[JobRunner]:
    """Opened in order: the replay resources (traces, pool; NATS and the settlement parts
    on first use), then the events publisher (connects on its first event); closed in
    reverse."""
    async with (
        ops.replay_resources(settings) as ctx,
        open_one_shot_publisher(settings.nats, "gateway-dlq-jobs") as publisher,
    ):
        yield JobRunner(ctx, publisher, options)


async def run_jobs(settings: Settings, options: RunnerOptions) -> int:
    """`gateway dlq run-jobs`: the number of jobs run (with `--once`)."""
    async with job_runner(settings, options) as runner:
        return await runner.run()
