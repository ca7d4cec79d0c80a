"""The console's overview: the figures it shows, the thresholds it draws them against,
and the decisions about them (which hour a row counts in, which provider is silent).

Plain values and pure functions; the SQL is in `adapters.postgres.console.stats`, the
page in `console.overview`. Time always comes in as an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gateway.core.console.outages import DependencyBrief, RetryBrief, outages_json
from gateway.core.health.alerting import AlertSettings

#: Hours in the net growth chart: the current (partial) hour and the 23 before it.
HOURS = 24
#: A provider with no event for longer than this stands out on the page.
SILENT_AFTER_S = 86_400.0
# The thresholds below are the Prometheus rules' own (deploy/prometheus/alerts.yml:
# GatewayOutboxLag, GatewayOrderKeyHeldTooLong, GatewayConfirmBacklog); no setting
# carries them.
OUTBOX_LAG_MAX_S = 300.0
HOLD_MAX_S = 900.0
CONFIRM_BACKLOG_MAX_S = 600.0


@dataclass(frozen=True)
class Thresholds:
    """The alert thresholds, from `[alerts]` as the in-process alerts and the Prometheus
    rules read them (more than `dlq_rows_max` rows in `dlq_window_s`, an open row older
    than `oldest_unresolved_max_s`)."""

    dlq_rows_max: int
    dlq_window_s: float
    oldest_unresolved_max_s: float
    outbox_lag_max_s: float = OUTBOX_LAG_MAX_S
    hold_max_s: float = HOLD_MAX_S
    silent_after_s: float = SILENT_AFTER_S
    confirm_backlog_max_s: float = CONFIRM_BACKLOG_MAX_S

    @classmethod
    def from_alerts(cls, alerts: AlertSettings) -> Thresholds:
        return cls(alerts.dlq_rows_max, alerts.dlq_window_s, alerts.oldest_unresolved_max_s)

    @property
    def growth_per_hour(self) -> float:
        """The burst rule as an hourly rate: `dlq_rows_max` in every `dlq_window_s` of
        an hour (10 in 5 min: 120 an hour). An hour's net growth above it means the
        burst alert fired in it, or would have at an even pace."""
        return self.dlq_rows_max * 3600.0 / self.dlq_window_s


@dataclass(frozen=True)
class HourBucket:
    """One clock hour (UTC) of the growth chart: rows first failed and rows resolved."""

    start: datetime
    opened: int = 0
    resolved: int = 0

    @property
    def net(self) -> int:
        return self.opened - self.resolved


@dataclass(frozen=True)
class OldestOpen:
    id: int
    first_failed_at: datetime
    age_s: float


@dataclass(frozen=True)
class ProviderLast:
    """A configured provider (or `service:NAME`) and its newest recorded event."""

    provider: str
    last_id: int | None
    last_at: datetime | None
    age_s: float | None  # None: never an event
    silent: bool


@dataclass(frozen=True)
class UnmappedBrief:
    """A payment provider's event type that moved no money, as the settle processes
    recorded it (`settlement_unmapped`)."""

    provider: str
    event_type: str
    events: int
    last_seen: datetime


@dataclass(frozen=True)
class ConfirmBacklog:
    """A provider's recorded webhooks still waiting for their fetch from its API (the
    confirm stage's `pending` rows), and the oldest one's age: while the API is down
    they are recorded but neither published nor parked."""

    provider: str
    pending: int
    oldest_s: float


@dataclass(frozen=True)
class JobBrief:
    """A replay job still to finish (planned or running) and its items' counts."""

    id: int
    kind: str
    state: str
    created_by: str
    created_at: datetime
    total: int
    pending: int
    replayed: int
    failed: int
    skipped: int


@dataclass(frozen=True)
class Overview:
    """Everything the overview page and `GET /console/api/v1/stats/overview` show."""

    at: datetime
    thresholds: Thresholds
    open_by_stage: tuple[tuple[str, int], ...]
    added_5m: int
    added_1h: int
    added_24h: int
    hours: tuple[HourBucket, ...]
    oldest_open: OldestOpen | None
    outbox_pending: int
    outbox_lag_s: float
    held_keys: int
    oldest_hold_s: float | None
    providers: tuple[ProviderLast, ...]
    jobs: tuple[JobBrief, ...]
    settlement_pending: int | None  # None: NATS could not be asked
    settlement_note: str | None = None  # why it is None
    added_in_window: int = 0  # rows first failed in the burst rule's `dlq_window_s`
    #: Merchant accounts below zero, by currency; None: the ledger could not be asked.
    negative_merchants: tuple[tuple[str, int], ...] | None = None
    ledger_note: str | None = None  # why `negative_merchants` is None
    #: The payment providers' event types that moved no money, seen within
    #: `UNMAPPED_WINDOW_S`, the most recent first.
    unmapped: tuple[UnmappedBrief, ...] = ()
    #: Each dependency's state (`core.console.outages`), and the settlement events in
    #: retry by class: an outage shows here before any row parks.
    dependencies: tuple[DependencyBrief, ...] = ()
    retrying: tuple[RetryBrief, ...] = ()
    #: The providers with a confirm fetch owed, by name (`confirm_backlog`).
    confirm_pending: tuple[ConfirmBacklog, ...] = ()

    def confirm_late(self, backlog: ConfirmBacklog) -> bool:
        """The provider's oldest owed fetch is older than the backlog alert allows."""
        return backlog.oldest_s > self.thresholds.confirm_backlog_max_s

    @property
    def retrying_total(self) -> int:
        return sum(r.events for r in self.retrying)

    @property
    def negative_total(self) -> int | None:
        found = self.negative_merchants
        return None if found is None else sum(n for _, n in found)

    @property
    def open_total(self) -> int:
        return sum(n for _, n in self.open_by_stage)

    @property
    def burst(self) -> bool:
        """More rows added within the burst rule's window than it allows."""
        return self.added_in_window > self.thresholds.dlq_rows_max

    @property
    def oldest_too_old(self) -> bool:
        oldest = self.oldest_open
        return oldest is not None and oldest.age_s > self.thresholds.oldest_unresolved_max_s


def hour_starts(now: datetime) -> list[datetime]:
    """The starts of the chart's hours, oldest first: the hour `now` is in and the
    `HOURS - 1` before it (UTC clock hours, so the labels read as times)."""
    top = now.replace(minute=0, second=0, microsecond=0)
    return [top - timedelta(hours=HOURS - 1 - i) for i in range(HOURS)]


def fill_hours(
    now: datetime, opened: Mapping[datetime, int], resolved: Mapping[datetime, int]
) -> tuple[HourBucket, ...]:
    """Every chart hour, with zeros where no row counted (the query returns only the
    hours that had some)."""
    return tuple(
        HourBucket(start, int(opened.get(start, 0)), int(resolved.get(start, 0)))
        for start in hour_starts(now)
    )


def age_s(now: datetime, then: datetime | None) -> float | None:
    """Seconds from `then` to `now`, never negative (clocks of two hosts disagree)."""
    return None if then is None else max(0.0, (now - then).total_seconds())


def provider_last(
    provider: str,
    last_id: int | None,
    last_at: datetime | None,
    now: datetime,
    silent_after_s: float = SILENT_AFTER_S,
) -> ProviderLast:
    """A provider's newest event, judged: silent when it has none, or none for longer
    than `silent_after_s`."""
    age = age_s(now, last_at)
    return ProviderLast(provider, last_id, last_at, age, age is None or age > silent_after_s)


def provider_names(providers: Sequence[str], services: Sequence[str]) -> list[str]:
    """The senders the gateway is configured for, as `processed_webhooks.provider`
    names them: providers by name, internal services as `service:NAME`."""
    return sorted(providers) + [f"service:{name}" for name in sorted(services)]


def confirm_backlog(stats: Mapping[str, tuple[int, float]]) -> tuple[ConfirmBacklog, ...]:
    """The confirm stage's `pending_stats` (provider: count, oldest age) as the overview
    lists them: by provider name, those with nothing owed left out, no age negative."""
    return tuple(
        ConfirmBacklog(provider, pending, max(0.0, oldest_s))
        for provider, (pending, oldest_s) in sorted(stats.items())
        if pending > 0
    )


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def to_json(view: Overview) -> dict[str, Any]:
    """The API's answer: the same figures as the page."""
    t, oldest, negative = view.thresholds, view.oldest_open, view.negative_merchants
    return {
        "at": view.at.isoformat(),
        "dead_letters": {
            "open_total": view.open_total,
            "open_by_stage": {stage: n for stage, n in view.open_by_stage},
            "added": {"5m": view.added_5m, "1h": view.added_1h, "24h": view.added_24h},
            "added_in_alert_window": view.added_in_window,
            "net_growth_per_hour": [
                {
                    "hour": b.start.isoformat(),
                    "opened": b.opened,
                    "resolved": b.resolved,
                    "net": b.net,
                }
                for b in view.hours
            ],
            "oldest_open": None
            if oldest is None
            else {
                "id": oldest.id,
                "first_failed_at": oldest.first_failed_at.isoformat(),
                "age_s": oldest.age_s,
            },
        },
        "thresholds": {
            "dlq_rows_max": t.dlq_rows_max,
            "dlq_window_s": t.dlq_window_s,
            "growth_per_hour": t.growth_per_hour,
            "oldest_unresolved_max_s": t.oldest_unresolved_max_s,
            "outbox_lag_max_s": t.outbox_lag_max_s,
            "hold_max_s": t.hold_max_s,
            "silent_after_s": t.silent_after_s,
            "confirm_backlog_max_s": t.confirm_backlog_max_s,
        },
        "outbox": {"pending": view.outbox_pending, "lag_s": view.outbox_lag_s},
        "settlement": {"pending": view.settlement_pending, "note": view.settlement_note},
        "ledger": {
            "negative_merchants": None if negative is None else dict(negative),
            "negative_total": view.negative_total,
            "note": view.ledger_note,
        },
        "held_keys": {"count": view.held_keys, "oldest_hold_s": view.oldest_hold_s},
        "confirm_pending": [
            {"provider": c.provider, "pending": c.pending, "oldest_s": c.oldest_s}
            for c in view.confirm_pending
        ],
        "providers": [
            {
                "provider": p.provider,
                "last_id": p.last_id,
                "last_at": _time(p.last_at),
                "age_s": p.age_s,
                "silent": p.silent,
            }
            for p in view.providers
        ],
        "unmapped_types": [
            {
                "provider": u.provider,
                "type": u.event_type,
                "events": u.events,
                "last_seen": u.last_seen.isoformat(),
            }
            for u in view.unmapped
        ],
        **outages_json(view.dependencies, view.retrying),
        "replay_jobs": [
            {
                "id": j.id,
                "kind": j.kind,
                "state": j.state,
                "created_by": j.created_by,
                "created_at": j.created_at.isoformat(),
                "total": j.total,
                "pending": j.pending,
                "replayed": j.replayed,
                "failed": j.failed,
                "skipped": j.skipped,
            }
            for j in view.jobs
        ],
    }
