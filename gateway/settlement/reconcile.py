"""`gateway reconcile`: re-publish accepted events that should have settled and did not.

The outbox makes sure JetStream acknowledged every recorded event once; a stream can
still lose acknowledged messages later (a purge by mistake, a store lost with its
replicas). Reconciliation closes that gap from the database side:

1. recorded events received at least `--older-than-s` ago and already published, whose
   subject the settlement worker consumes, and whose payload settles (or cannot be read);
2. with no settlement outcome: no `settled` row for the transfer the event would post,
   and no dead letter still open or closed by an operator (`resolution = 'manual'`);
3. are published again as `Nats-Msg-Id = "{provider}:{event_id}:reconcile-{run}"`, a new
   id, so the duplicate window cannot drop them, with the original gateway headers, so
   the worker rebuilds the same event. Transfer ids are derived from the settlement, so
   settling an event again that did settle meanwhile moves no money.

Run it from cron (or a Kubernetes CronJob) every few minutes; each run is one pass. The
composition root opens what a pass needs (`gateway.wiring.settlement.run_reconcile`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.adapters.jetstream.broker import message_headers
from gateway.adapters.jetstream.one_shot import OneShotPublisher
from gateway.adapters.postgres import Conn, connection
from gateway.adapters.postgres import claims as claims_store
from gateway.adapters.postgres import settlements as store
from gateway.adapters.postgres.webhooks import (
    StoredEvent,
    reconcile_candidates,
    reconcile_removed,
)
from gateway.core.events.model import Event, subject_allowed
from gateway.core.providers.movements import may_move_money
from gateway.core.settlement.instructions import SettlementState, transfer_id
from gateway.errors import BrokerUnavailable, ConfigError, GatewayError
from gateway.settings import ProviderSettings, SettlementSettings
from gateway.settlement.parts import ReconcileParts
from gateway.settlement.settler import instruction_for

log = logging.getLogger(__name__)

DEFAULT_OLDER_THAN_S = 900.0  # beyond the worker's own retry schedule (5 s + 30 s + 2 min)
DEFAULT_LOOKBACK_S = 7 * 86_400.0
_IN_FLIGHT = 256  # publishes awaiting their PubAck at once


class Verdict(enum.StrEnum):
    """What an event means to the settlement worker."""

    IGNORED = "ignored"  # not consumed, or a type that does not settle
    INVALID = "invalid"  # consumed, but the worker would dead-letter its payload
    SETTLES = "settles"


def verdict(
    event: Event, schemes: Mapping[str, str], subjects: Sequence[str]
) -> tuple[Verdict, int | None]:
    """Pure: does `event` settle, and with which transfer id."""
    if event.subject is None or not subject_allowed(event.subject, tuple(subjects)):
        return Verdict.IGNORED, None
    try:
        instruction = instruction_for(event, schemes)
    except GatewayError:
        return Verdict.INVALID, None
    if instruction is None:
        return Verdict.IGNORED, None
    return Verdict.SETTLES, transfer_id(instruction)


@dataclass
class ReconcileReport:
    """What one pass found and did."""

    run_id: str
    scanned: int = 0  # recorded events old enough with no open or manual dead letter
    settled: int = 0  # already settled: nothing to do
    republished: int = 0
    failed: int = 0  # publish not acknowledged; the next pass tries again
    # Settling events whose payload retention removed: they cannot be checked or
    # re-published (keep --lookback-s below [retention] payload_max_age_s).
    payload_removed: list[str] = field(default_factory=list)
    dry_run: bool = False
    events: list[str] = field(default_factory=list)  # "{provider}:{event_id}" found unsettled

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def new_run_id(now: datetime) -> str:
    """A run id that sorts by time and never repeats within a duplicate window."""
    return now.strftime("%Y%m%dT%H%M%S%fZ")


@dataclass(frozen=True)
class Scan:
    """What one pass looks through: the events older than `older_than_s` and younger
    than `lookback_s`, read `batch_size` at a time, judged by each provider's scheme and
    the settling subjects."""

    schemes: Mapping[str, str]
    subjects: tuple[str, ...]
    older_than_s: float
    lookback_s: float
    batch_size: int

    @classmethod
    def of(
        cls,
        providers: Mapping[str, ProviderSettings],
        settlement: SettlementSettings,
        older_than_s: float,
        lookback_s: float,
        batch_size: int,
    ) -> Scan:
        schemes = {name: p.scheme for name, p in providers.items()}
        return cls(schemes, tuple(settlement.subjects), older_than_s, lookback_s, batch_size)


async def find_unsettled(conn: Conn, scan: Scan) -> tuple[int, int, list[StoredEvent]]:
    """(scanned, already settled, events to re-publish), reading in id order."""
    scanned = settled = 0
    unsettled: list[StoredEvent] = []
    after_id = 0
    while True:
        page = await reconcile_candidates(
            conn, scan.older_than_s, scan.lookback_s, after_id, scan.batch_size
        )
        if not page:
            return scanned, settled, unsettled
        after_id = page[-1].webhook_id
        wanted: dict[int, StoredEvent] = {}
        for stored in page:
            kind, tid = verdict(stored.event, scan.schemes, scan.subjects)
            if kind is Verdict.IGNORED:
                continue
            scanned += 1
            if tid is None:
                unsettled.append(stored)  # an invalid payload: let the worker park it
            else:
                wanted[tid] = stored
        if wanted:
            found = await store.by_transfers(conn, list(wanted))
            done = {t for t, row in found.items() if row.state is SettlementState.SETTLED}
            # A refund or dispute netted to nothing has a claim and no transfer: settled.
            netted = await claims_store.netted(conn, [t for t in wanted if t not in done])
            settled += len(done) + len(netted)
            unsettled += [s for t, s in wanted.items() if t not in done and t not in netted]


async def find_payload_removed(conn: Conn, scan: Scan) -> list[str]:
    """`provider:event_id` of events on a settling subject, in the window, with no
    outcome, whose payload retention removed: whether they settled cannot be told."""
    found: list[str] = []
    after_id = 0
    window = (scan.older_than_s, scan.lookback_s)
    while page := await reconcile_removed(conn, *window, after_id, scan.batch_size):
        after_id = page[-1][0]
        found += [
            f"{p}:{e}"
            for _, p, e, subject in page
            if subject_allowed(subject, scan.subjects)
            and _may_have_settled(p, subject, scan.schemes)
        ]
    return found


def _may_have_settled(provider: str, subject: str, schemes: Mapping[str, str]) -> bool:
    """Whether the event's mapping names its type; a provider no longer configured
    cannot be told, so it is listed (never hidden)."""
    if provider not in schemes and not provider.startswith("service:"):
        return True
    return may_move_money(provider, _type_of(subject), schemes)


def _type_of(subject: str) -> str:
    """The event type a subject carries: `webhooks.{provider}.{type}` or
    `events.{service}.{type}` (a type of subject-safe tokens reads as itself)."""
    parts = subject.split(".", 2)
    return parts[2] if len(parts) == 3 else ""


async def republish(
    publisher: OneShotPublisher, events: Sequence[StoredEvent], *, run_id: str
) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """Publish each event under a new message id; (acknowledged, not acknowledged)."""

    async def one(stored: StoredEvent) -> bool:
        headers = message_headers(stored)
        headers["Nats-Msg-Id"] = f"{stored.event.msg_id}:reconcile-{run_id}"
        headers["Gateway-Reconciled"] = run_id
        try:
            # False for a duplicate: the stream dropped it, which only a reused run id does.
            return await publisher.publish(stored.event.subject or "", stored.event.body, headers)
        except BrokerUnavailable as exc:  # not acknowledged: left for the next pass
            log.warning(
                "re-publish failed", extra={"msg_id": stored.event.msg_id, "error": str(exc)}
            )
            return False

    acked: list[StoredEvent] = []
    failed: list[StoredEvent] = []
    for start in range(0, len(events), _IN_FLIGHT):
        batch = events[start : start + _IN_FLIGHT]
        results = await asyncio.gather(*(one(s) for s in batch))
        for stored, ok in zip(batch, results, strict=True):
            (acked if ok else failed).append(stored)
    return acked, failed


async def reconcile(
    parts: ReconcileParts,
    *,
    older_than_s: float = DEFAULT_OLDER_THAN_S,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    batch_size: int = 500,
    dry_run: bool = False,
    run_id: str | None = None,
) -> ReconcileReport:
    """One reconciliation pass against the database and stream the composition root opened."""
    if older_than_s < 0:
        raise ConfigError("--older-than-s", f"must not be negative, got {older_than_s:g}")
    if lookback_s <= 0 or batch_size <= 0:
        raise ConfigError("--lookback-s/--batch-size", "must be positive")
    report = ReconcileReport(run_id=run_id or new_run_id(datetime.now(UTC)), dry_run=dry_run)
    scan = Scan.of(parts.providers, parts.settlement, older_than_s, lookback_s, batch_size)
    async with connection(parts.pool) as conn:
        scanned, settled, unsettled = await find_unsettled(conn, scan)
        report.payload_removed = await find_payload_removed(conn, scan)
    report.scanned, report.settled = scanned, settled
    if report.payload_removed:
        log.warning(
            "events whose payload was removed cannot be reconciled",
            extra={"run_id": report.run_id, "events": report.payload_removed[:100]},
        )
    report.events = [s.event.msg_id for s in unsettled]
    if dry_run or not unsettled:
        return report
    # NATS is needed only now, so a dry run works while it is down. One pass, one
    # connection: a pass that cannot connect fails fast (`BrokerUnavailable`), and the
    # next pass finds the same events again.
    await parts.publisher.connect()
    acked, failed = await republish(parts.publisher, unsettled, run_id=report.run_id)
    report.republished, report.failed = len(acked), len(failed)
    if acked:  # each of these is an incident: name them (the first hundred)
        log.warning(
            "events with no settlement outcome re-published",
            extra={"run_id": report.run_id, "events": [s.event.msg_id for s in acked[:100]]},
        )
    log.info("reconcile pass done", extra=report.to_json() | {"events": len(report.events)})
    return report
