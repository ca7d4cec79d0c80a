"""`gateway reconcile`: re-publish accepted events that should have settled and did not.

The outbox makes sure JetStream acknowledged every recorded event once; a stream can
still lose acknowledged messages later (a purge by mistake, a store lost with its
replicas). Reconciliation closes that gap from the database side:

1. recorded events acknowledged at least `--older-than-s` ago whose subject the
   settlement worker consumes, and whose payload settles (or cannot be read);
2. with no settlement outcome: no `settled` row for the transfer the event would post,
   and no dead letter still open or closed by an operator (`resolution = 'manual'`);
3. are published again as `Nats-Msg-Id = "{provider}:{event_id}:reconcile-{run}"`, a new
   id, so the duplicate window cannot drop them, with the original gateway headers, so
   the worker rebuilds the same event. Transfer ids are derived from the settlement, so
   settling an event again that did settle meanwhile moves no money.

Run it from cron (or a Kubernetes CronJob) every few minutes; each run is one pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats
import nats.errors
from nats.js import JetStreamContext

from gateway.adapters import settlement_store as store
from gateway.adapters.nats import message_headers
from gateway.adapters.postgres import Conn, connection, open_pool, translate_errors
from gateway.adapters.webhook_store import StoredEvent, stored_event
from gateway.core.model import Event, subject_allowed
from gateway.core.settlement import SettlementState, transfer_id
from gateway.errors import BrokerUnavailable, ConfigError, GatewayError
from gateway.settings import Settings
from gateway.settlement.settler import instruction_for

log = logging.getLogger("gateway.settlement.reconcile")

DEFAULT_OLDER_THAN_S = 900.0  # beyond the worker's own retry schedule (5 s + 30 s + 2 min)
DEFAULT_LOOKBACK_S = 7 * 86_400.0
_IN_FLIGHT = 256  # publishes awaiting their PubAck at once

_CANDIDATES = """
SELECT pw.id, pw.provider, pw.event_id, pw.event_type, pw.subject, pw.headers::text AS headers,
       pw.body, pw.received_at
FROM processed_webhooks pw
WHERE pw.published_at IS NOT NULL AND pw.subject IS NOT NULL
  AND pw.published_at < now() - make_interval(secs => $1)
  AND pw.received_at >= now() - make_interval(secs => $2)
  AND pw.id > $3
  AND NOT EXISTS (
      SELECT 1 FROM dlq_webhooks d
      WHERE d.provider = pw.provider AND d.event_id = pw.event_id
        AND (NOT d.is_resolved OR d.resolution = 'manual'))
ORDER BY pw.id
LIMIT $4
"""


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
    dry_run: bool = False
    events: list[str] = field(default_factory=list)  # "{provider}:{event_id}" found unsettled

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def new_run_id(now: datetime) -> str:
    """A run id that sorts by time and never repeats within a duplicate window."""
    return now.strftime("%Y%m%dT%H%M%S%fZ")


async def find_unsettled(
    conn: Conn, settings: Settings, older_than_s: float, lookback_s: float, batch_size: int
) -> tuple[int, int, list[StoredEvent]]:
    """(scanned, already settled, events to re-publish), reading in id order."""
    schemes = {name: p.scheme for name, p in settings.providers.items()}
    subjects = settings.settlement.subjects
    scanned = settled = 0
    unsettled: list[StoredEvent] = []
    after_id = 0
    while True:
        with translate_errors():
            rows = await conn.fetch(_CANDIDATES, older_than_s, lookback_s, after_id, batch_size)
        if not rows:
            return scanned, settled, unsettled
        after_id = int(rows[-1]["id"])
        wanted: dict[int, StoredEvent] = {}
        for stored in map(stored_event, rows):
            kind, tid = verdict(stored.event, schemes, subjects)
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
            settled += len(done)
            unsettled += [s for t, s in wanted.items() if t not in done]


async def republish(
    js: JetStreamContext,
    events: Sequence[StoredEvent],
    *,
    stream: str,
    run_id: str,
    timeout_s: float,
) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """Publish each event under a new message id; (acknowledged, not acknowledged)."""

    async def one(stored: StoredEvent) -> bool:
        headers = message_headers(stored)
        headers["Nats-Msg-Id"] = f"{stored.event.msg_id}:reconcile-{run_id}"
        headers["Gateway-Reconciled"] = run_id
        try:
            ack = await js.publish(
                stored.event.subject or "",
                stored.event.body,
                timeout=timeout_s,
                stream=stream,
                headers=headers,
            )
        except Exception as exc:  # any failure leaves the event for the next pass
            log.warning(
                "re-publish failed",
                extra={"msg_id": stored.event.msg_id, "error": type(exc).__name__},
            )
            return False
        # A duplicate ack means the stream dropped it: only a reused run id can do that.
        return not bool(getattr(ack, "duplicate", False))

    acked: list[StoredEvent] = []
    failed: list[StoredEvent] = []
    for start in range(0, len(events), _IN_FLIGHT):
        batch = events[start : start + _IN_FLIGHT]
        results = await asyncio.gather(*(one(s) for s in batch))
        for stored, ok in zip(batch, results, strict=True):
            (acked if ok else failed).append(stored)
    return acked, failed


async def reconcile(
    settings: Settings,
    *,
    older_than_s: float = DEFAULT_OLDER_THAN_S,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    batch_size: int = 500,
    dry_run: bool = False,
    run_id: str | None = None,
) -> ReconcileReport:
    """One reconciliation pass against the configured database and stream."""
    if older_than_s < 0:
        raise ConfigError("--older-than-s", f"must not be negative, got {older_than_s:g}")
    if lookback_s <= 0 or batch_size <= 0:
        raise ConfigError("--lookback-s/--batch-size", "must be positive")
    report = ReconcileReport(run_id=run_id or new_run_id(datetime.now(UTC)), dry_run=dry_run)
    async with open_pool(settings.database_url, max_size=2) as pool, connection(pool) as conn:
        scanned, settled, unsettled = await find_unsettled(
            conn, settings, older_than_s, lookback_s, batch_size
        )
    report.scanned, report.settled = scanned, settled
    report.events = [s.event.msg_id for s in unsettled]
    if dry_run or not unsettled:
        return report
    # One pass, one connection: no reconnect loop (a pass that cannot publish fails fast,
    # and the next pass finds the same events again).
    timeout_s = settings.nats.request_timeout_s
    try:
        nc = await nats.connect(
            settings.nats.servers,
            name="gateway-reconcile",
            connect_timeout=max(1, int(timeout_s)),
            # nats-py retries the first connect until every server has failed more than
            # max_reconnect_attempts times (0 would mean for ever): two tries, then give up.
            max_reconnect_attempts=1,
            reconnect_time_wait=0.5,
            allow_reconnect=False,
        )
    except (nats.errors.Error, OSError, TimeoutError) as exc:
        raise BrokerUnavailable(f"NATS is not reachable: {type(exc).__name__}") from exc
    try:
        acked, failed = await republish(
            nc.jetstream(timeout=timeout_s),
            unsettled,
            stream=settings.nats.stream,
            run_id=report.run_id,
            timeout_s=timeout_s,
        )
    finally:
        with contextlib.suppress(nats.errors.Error, OSError, TimeoutError):
            await nc.close()
    report.republished, report.failed = len(acked), len(failed)
    if acked:  # each of these is an incident: name them (the first hundred)
        log.warning(
            "events with no settlement outcome re-published",
            extra={"run_id": report.run_id, "events": [s.event.msg_id for s in acked[:100]]},
        )
    log.info("reconcile pass done", extra=report.to_json() | {"events": len(report.events)})
    return report
