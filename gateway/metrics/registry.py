"""`Metrics`: every metric the gateway exports, in a private registry per instance (the
composition root owns the process's one), rendered alone or merged with the other
processes of the run."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from gateway.metrics.families import Counter, Gauge, Histogram
from gateway.metrics.loop_lag import LAG_BUCKETS_S
from gateway.metrics.shared import MULTIPROC_ENV, forget_dead_processes

#: How each gauge combines across the workers of `gateway serve --workers N`. Every one
#: of them is read from the shared tables by each worker in turn, so each worker holds the
#: same figure at a different age: the most recent reading of a live worker is the
#: table's state (a sum would count the backlog N times, `liveall` would give dashboards
#: N series to pick from, and `max` would keep a dead worker's reading for ever).
_GAUGE_MODE = "livemostrecent"


class Metrics:
    """Every metric the gateway exports; names are part of the public contract."""

    def __init__(self) -> None:
        self._registry = reg = CollectorRegistry(auto_describe=False)
        #: Where every process of this run writes its values (`None`: this process only).
        self.shared_dir = os.environ.get(MULTIPROC_ENV) or None
        self.webhooks_total = Counter(
            "gateway_webhooks_total",
            "Webhook and event deliveries by provider and outcome.",
            ("outcome", "provider"),
            reg,
        )
        self.request_seconds = Histogram(
            "gateway_request_seconds", "Time to answer an ingestion request.", (), reg
        )
        self.event_loop_lag_seconds = Histogram(
            "gateway_event_loop_lag_seconds",
            "How much later than due the serving process's event loop woke a timer "
            "(sampled every 10 ms): a pause here delays every request in flight.",
            (),
            reg,
            buckets=LAG_BUCKETS_S,
        )
        self.http_refused_total = Counter(
            "gateway_http_refused_total",
            "Requests and connections refused at the HTTP edge, by reason (header_too_large, "
            "header_timeout, no_request, over_capacity).",
            ("reason",),
            reg,
        )
        self.duplicates_from_memory_total = Counter(
            "gateway_duplicates_from_memory_total",
            "Repeats answered 'duplicate' from this process's memory of committed rows.",
            (),
            reg,
        )
        self.outbox_pending = Gauge(
            "gateway_outbox_pending",
            "Recorded events not yet confirmed by JetStream.",
            (),
            reg,
            _GAUGE_MODE,
        )
        self.outbox_lag_seconds = Gauge(
            "gateway_outbox_lag_seconds",
            "Age of the oldest event not yet confirmed by JetStream.",
            (),
            reg,
            _GAUGE_MODE,
        )
        self.published_total = Counter(
            "gateway_published_total",
            "Events confirmed by JetStream, by path (inline, relay).",
            ("path",),
            reg,
        )
        self.retries_total = Counter(
            "gateway_retries_total",
            "Retries scheduled by consumers, by subject.",
            ("subject",),
            reg,
        )
        self.dlq_total = Counter(
            "gateway_dlq_total",
            "Events parked in the dead-letter table, by stage and error class.",
            ("error_class", "stage"),
            reg,
        )
        self.dlq_auto_replays_total = Counter(
            "gateway_dlq_auto_replays_total",
            "Dead letters re-driven automatically once their dependency answered, by error "
            "class and outcome (replayed, failed, skipped).",
            ("error_class", "outcome"),
            reg,
        )
        self.settlements_total = Counter(
            "gateway_settlements_total",
            "Settlement outcomes (settled, duplicate, ignored, retry, dead_letter).",
            ("outcome",),
            reg,
        )
        self.settlement_unmapped_total = Counter(
            "gateway_settlement_unmapped_total",
            "A payment provider's events that moved no money, by provider and type.",
            ("provider", "type"),
            reg,
        )
        self.ledger_negative_merchants = Gauge(
            "gateway_ledger_negative_merchants",
            "Merchant accounts whose balance is below zero, by ledger currency.",
            ("currency",),
            reg,
            _GAUGE_MODE,
        )
        self.critical_total = Counter(
            "gateway_critical_total",
            "Critical events (ledger collisions, imbalance, ledger down for good).",
            ("reason",),
            reg,
        )
        # The lowest of a process's workers: one worker that sees a dependency down is
        # enough to say so (each process writes only what it observed itself).
        self.dependency_up = Gauge(
            "gateway_dependency_up",
            "1 while this process last saw the dependency answer, 0 after it failed.",
            ("dependency",),
            reg,
            "livemin",
        )
        self.dlq_unresolved = Gauge(
            "gateway_dlq_unresolved", "Dead-letter rows not yet resolved.", (), reg, _GAUGE_MODE
        )
        self.dlq_oldest_unresolved_seconds = Gauge(
            "gateway_dlq_oldest_unresolved_seconds",
            "Age of the oldest unresolved dead-letter row.",
            (),
            reg,
            _GAUGE_MODE,
        )

        self.order_held_keys = Gauge(
            "gateway_order_held_keys",
            "Ordering keys held by a parked event (their later events are parked behind it).",
            (),
            reg,
            _GAUGE_MODE,
        )
        self.order_oldest_hold_seconds = Gauge(
            "gateway_order_oldest_hold_seconds",
            "Age of the oldest hold on an ordering key (0: none held).",
            (),
            reg,
            _GAUGE_MODE,
        )
        self.order_gap_waits_total = Counter(
            "gateway_order_gap_waits_total",
            "Deliveries that had to wait for an earlier event of their key (held in the "
            "worker or put back), counted once each.",
            ("provider",),
            reg,
        )
        self.order_blocked_parked_total = Counter(
            "gateway_order_blocked_parked_total",
            "Events parked as BLOCKED_BY_PREDECESSOR: their key was held.",
            (),
            reg,
        )
        self.order_deferred_total = Counter(
            "gateway_order_deferred_total",
            "Events deferred out of their key's order: they needed an earlier event of the "
            "key that had not settled (a refund before its capture).",
            (),
            reg,
        )

        self.retention_removed_total = Counter(
            "gateway_retention_removed_total",
            "Rows retention emptied (what=payload) or deleted (what=key), by table.",
            ("table", "what"),
            reg,
        )
        self.retention_oldest_payload_seconds = Gauge(
            "gateway_retention_oldest_payload_seconds",
            "Age of the oldest event whose body and headers are still kept.",
            (),
            reg,
            _GAUGE_MODE,
        )
        self.storage_rows = Gauge(
            "gateway_storage_rows",
            "Rows per table (PostgreSQL's estimate, reltuples).",
            ("table",),
            reg,
            _GAUGE_MODE,
        )
        self.storage_bytes = Gauge(
            "gateway_storage_bytes",
            "Bytes per table, indexes and TOAST included.",
            ("table",),
            reg,
            _GAUGE_MODE,
        )

        # One-hot: 1 for the state last read, 0 for the others, every state always
        # present (so `== 1` alert rules and dashboards need no absent() guard).
        self.database_durability = Gauge(
            "gateway_database_durability",
            "The database's durability as last read, one series per state "
            "(synchronous, at_risk, waiting_for_standby, unknown): 1 for the current one.",
            ("state",),
            reg,
            _GAUGE_MODE,
        )
        self.database_synchronous_standbys = Gauge(
            "gateway_database_synchronous_standbys",
            "Synchronous standbys streaming (sync_state sync or quorum) as last read.",
            (),
            reg,
            _GAUGE_MODE,
        )

        self.backfill_events_total = Counter(
            "gateway_backfill_events_total",
            "Events listed by a provider's API during backfill, by provider and outcome "
            "(present, recovered, failed); recovered means a webhook never arrived.",
            ("outcome", "provider"),
            reg,
        )
        self.backfill_last_complete = Gauge(
            "gateway_backfill_last_complete_timestamp_seconds",
            "When the provider's last backfill pass completed (Unix time).",
            ("provider",),
            reg,
            _GAUGE_MODE,
        )
        self.backfill_pages_skipped_total = Counter(
            "gateway_backfill_pages_skipped_total",
            "Backfill pages given up after failing api_page_attempts passes in a row: "
            "the rest of that run's window was not read.",
            ("provider",),
            reg,
        )

        self.confirm_fetches_total = Counter(
            "gateway_confirm_fetches_total",
            "Fetches of the confirm stage, by provider and outcome (confirmed, retry, parked).",
            ("outcome", "provider"),
            reg,
        )
        self.confirm_fetch_seconds = Histogram(
            "gateway_confirm_fetch_seconds",
            "Time a provider's API took to answer one confirm fetch.",
            ("provider",),
            reg,
        )
        self.confirm_pending = Gauge(
            "gateway_confirm_pending",
            "Webhooks whose confirm fetch is still owed, as last read.",
            ("provider",),
            reg,
            _GAUGE_MODE,
        )
        self.confirm_oldest_pending_seconds = Gauge(
            "gateway_confirm_oldest_pending_seconds",
            "Age of the oldest webhook whose confirm fetch is still owed (0: none).",
            ("provider",),
            reg,
            _GAUGE_MODE,
        )

        self.forward_attempts_total = Counter(
            "gateway_forward_attempts_total",
            "Attempts to deliver an event to a forwarding destination, by destination and "
            "outcome (delivered, retry, parked, paused, blocked, filtered).",
            ("destination", "outcome"),
            reg,
        )
        self.forward_latency_seconds = Histogram(
            "gateway_forward_latency_seconds",
            "Time a forwarding target took to answer one attempt.",
            ("destination",),
            reg,
        )
        self.forward_lag = Gauge(
            "gateway_forward_lag",
            "Events the destination's consumer has not had acknowledged yet (pending and "
            "in flight), as last read.",
            ("destination",),
            reg,
            _GAUGE_MODE,
        )
        self.forward_oldest_undelivered_seconds = Gauge(
            "gateway_forward_oldest_undelivered_seconds",
            "Age of the oldest event the destination has not delivered yet (0: none).",
            ("destination",),
            reg,
            _GAUGE_MODE,
        )

    def render(self) -> str:
        """The Prometheus text exposition of every metric: with a shared directory, of
        every process of the run (any worker answers for all of them)."""
        if self.shared_dir is None:
            return generate_latest(self._registry).decode()
        forget_dead_processes(self.shared_dir)
        merged = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(merged, self.shared_dir)  # type: ignore[no-untyped-call]  # unannotated there
        return generate_latest(merged).decode()

    def close(self) -> None:
        """This process stops reporting: its gauges leave the merged figures (its counts
        stay in the totals, as a counter's must)."""
        if self.shared_dir is not None:
            mark_process_dead(os.getpid(), self.shared_dir)  # type: ignore[no-untyped-call]  # unannotated there
