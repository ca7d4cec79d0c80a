"""Automatic re-drive of dead letters (`[dlq] auto_replay`), run inside `gateway dlq
run-jobs` beside its jobs: rows parked because a dependency was away are replayed once
it answers again, with the same code as `gateway dlq replay`.

A round, every `auto_replay_interval_s` (the first one an interval after start):

1. Take the round's lock (a PostgreSQL advisory lock): one process at a time, so two
   runners never both count an automatic replay of one row. Another process's round
   in progress: this one is skipped.
2. Read the candidates: the open rows of the configured classes in replayable stages
   whose automatic replays are not spent, in the order a replay claims rows.
3. Probe each dependency a candidate waits on, once: the currency-service by one HTTP
   request, the ledger by reading a balance, NATS by the stream's info. A probe that
   raises or passes `auto_replay_probe_timeout_s` says the dependency is away.
4. Decide which rows are due (`core.dlq.auto_replay.due`: class, cap, backoff, round cap).
5. Replay them one at a time, paced at `auto_replay_rate_per_s`, each through
   `gateway.dlq.replay.replay` with its one id, exactly as a person's replay: the claim
   re-checks the row under lock (a row resolved or held meanwhile is passed over), and in
   the transaction that records the outcome the row's automatic count goes up by one and
   an audit row (`via = 'auto'`) is written. A row that fails again with a class blaming
   its dependency, or a handler that cannot be built, stops that dependency's rows for
   the round: it answered the probe but not the work.
6. Count each in `gateway_dlq_auto_replays_total{error_class, outcome}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gateway.adapters.currency_probe import currency_probe
from gateway.adapters.postgres import Conn, connection
from gateway.adapters.postgres.dead_letters import auto_replays as store
from gateway.core.dlq import auto_replay as decide
from gateway.core.dlq.auto_replay import AutoOutcome, Candidate
from gateway.core.dlq.filters import DlqFilter, ReplayOptions
from gateway.core.dlq.model import DlqRow, RowOutcome
from gateway.core.health.dependencies import Dependency
from gateway.core.operator_input import pace_delay_s
from gateway.dlq.parts import ReplayContext, StageHandlers
from gateway.dlq.plan import RowResult
from gateway.errors import DatabaseUnavailable, RowNotFound

log = logging.getLogger(__name__)

#: Candidates a round reads per row it may take: rows still waiting out their backoff are
#: read too, so the round looks past a few of them.
_READ_PER_TAKEN = 4
#: Beyond a probe's own deadline: opening the settlement side or NATS on first use.
_OPENING_S = 30.0
Probe = Callable[[], Awaitable[bool]]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RoundReport:
    """What one round did: each outcome's count, and the dependencies found answering."""

    outcomes: Counter[str] = field(default_factory=Counter)
    answering: frozenset[Dependency] = frozenset()
    skipped_round: bool = False  # another process held the round's lock

    @property
    def replayed(self) -> int:
        return self.outcomes[AutoOutcome.REPLAYED.value]


class AutoReplayer:
    """The automatic re-drive of one `run-jobs` process (see the module docstring)."""

    def __init__(
        self,
        ctx: ReplayContext,
        probes: Mapping[Dependency, Probe],
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.ctx = ctx
        self.settings = ctx.settings.dlq
        self.probes = probes
        self.clock = clock

    async def run(self) -> None:
        """Rounds every `auto_replay_interval_s` until cancelled; a round's error is
        logged and the next round tries again."""
        interval_s = self.settings.auto_replay_interval_s
        log.info("automatic re-drive on", extra={"interval_s": interval_s})
        while True:
            await asyncio.sleep(interval_s)
            try:
                report = await self.round()
            except DatabaseUnavailable as exc:
                log.warning("automatic re-drive: database unavailable", extra={"error": str(exc)})
                continue
            except Exception:
                log.exception("automatic re-drive: the round failed")
                continue
            if report.outcomes:
                log.info("automatic re-drive round", extra=dict(report.outcomes))

    async def round(self) -> RoundReport:
        """One round (stages 1 to 6)."""
        async with connection(self.ctx.pool) as conn:
            if not await store.try_round_lock(conn):
                return RoundReport(skipped_round=True)
            try:
                return await self._locked_round(conn)
            finally:
                await store.release_round_lock(conn)

    async def _locked_round(self, conn: Conn) -> RoundReport:
        from gateway.dlq import replay as replay_mod  # loads the settlement side, as jobs do

        policy = self.settings.policy
        handlers = replay_mod.stage_handlers(self.ctx.settings.forward)
        rows = await store.candidates(
            conn,
            sorted(policy.classes),
            sorted(handlers),
            policy.max_per_row,
            policy.per_round * _READ_PER_TAKEN,
        )
        answering = await self._probe({decide.WAITS_ON[r.error_class] for r in rows})
        report = RoundReport(answering=frozenset(answering))
        started_s, done = time.monotonic(), 0
        for row in decide.due(rows, answering, policy, self.clock()):
            dependency = decide.WAITS_ON[row.error_class]
            if dependency not in answering:  # went away again earlier in this round
                continue
            rate_per_s = self.settings.auto_replay_rate_per_s
            await asyncio.sleep(pace_delay_s(started_s, done, rate_per_s, time.monotonic()))
            outcome, new_class = await self._replay(row, handlers)
            done += 1
            report.outcomes[outcome.value] += 1
            self.ctx.metrics.dlq_auto_replays_total.inc(
                error_class=row.error_class, outcome=outcome.value
            )
            if outcome is AutoOutcome.FAILED and decide.down_again(new_class) is not None:
                answering.discard(dependency)
        return report

    async def _probe(self, needed: Collection[Dependency]) -> set[Dependency]:
        # Each probe bounds its own question by `auto_replay_probe_timeout_s`; this
        # bound is for opening what it asks through (the settlement side, NATS) on
        # first use, which may wait for a connection.
        guard_s = self.settings.auto_replay_probe_timeout_s + _OPENING_S
        answering: set[Dependency] = set()
        for dependency in sorted(needed):
            probe = self.probes.get(dependency)
            try:
                async with asyncio.timeout(guard_s):
                    ok = probe is not None and await probe()
            except Exception:  # any failure of a probe says the same: not answering
                log.debug("automatic re-drive: probe failed", exc_info=True)
                ok = False
            if ok:
                answering.add(dependency)
            else:
                log.info("automatic re-drive waits", extra={"dependency": dependency.value})
        return answering

    async def _replay(
        self, row: Candidate, handlers: StageHandlers
    ) -> tuple[AutoOutcome, str | None]:
        """Replay one row as `gateway dlq replay --id` does; its outcome and new class."""
        from gateway.dlq import replay as replay_mod

        # The claim re-checks under lock that the row is still open and of a configured
        # class; `force`: the cap here is the automatic count, not `attempts`.
        f = DlqFilter(error_classes=tuple(sorted(self.settings.policy.classes)))
        options = ReplayOptions(ids=(row.id,), force=True)
        try:
            summary = await replay_mod.replay(
                self.ctx, f, options, handlers=handlers, record=self._record
            )
        except (DatabaseUnavailable, asyncio.CancelledError):
            raise
        except RowNotFound:  # removed since it was read (retention)
            return AutoOutcome.SKIPPED, None
        except Exception:  # its handler could not be built: the dependency is away again
            log.warning(
                "automatic re-drive: cannot replay", extra={"dlq_id": row.id}, exc_info=True
            )
            return AutoOutcome.FAILED, row.error_class
        claimed = [r for r in summary.results if r.outcome is not RowOutcome.SKIPPED]
        if not claimed:
            return AutoOutcome.SKIPPED, None
        result = claimed[-1]
        if result.outcome is RowOutcome.REPLAYED:
            return AutoOutcome.REPLAYED, None
        return AutoOutcome.FAILED, result.error_class

    async def _record(self, conn: Conn, row: DlqRow, result: RowResult) -> None:
        failed = result.outcome is not RowOutcome.REPLAYED
        await store.record_auto_replay(
            conn,
            row.id,
            row.error_class,
            result.outcome.value,
            result.error_class if failed else None,
            result.message if failed else None,
        )


async def _ledger_answers(ctx: ReplayContext, timeout_s: float) -> bool:
    parts = await ctx.settlement()
    async with asyncio.timeout(timeout_s):
        await parts.ledger.balance(1)  # any id: an answer, found or not, is what counts
    return True


async def _nats_answers(ctx: ReplayContext, timeout_s: float) -> bool:
    broker = await ctx.broker()
    async with asyncio.timeout(timeout_s):
        return await broker.stream_answers()


@contextlib.asynccontextmanager
async def auto_replayer(ctx: ReplayContext) -> AsyncIterator[AutoReplayer]:
    """The re-drive with its probes: the currency-service's on an HTTP client of its own
    (closed with the block), the ledger's and NATS's on the replay's own connections."""
    settings = ctx.settings
    timeout_s = settings.dlq.auto_replay_probe_timeout_s
    async with currency_probe(
        settings.currency.url, settings.settlement.currency, timeout_s
    ) as currency:
        probes: dict[Dependency, Probe] = {
            Dependency.CURRENCY_SERVICE: currency,
            Dependency.LEDGER: lambda: _ledger_answers(ctx, timeout_s),
            Dependency.NATS: lambda: _nats_answers(ctx, timeout_s),
        }
        yield AutoReplayer(ctx, probes)
