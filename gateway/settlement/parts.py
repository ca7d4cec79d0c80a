"""What the settlement worker, DLQ replay of settlement rows and reconciliation work with,
opened by the composition root (`gateway.wiring.settlement`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.adapters.alert_webhook import AlertWebhook
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import DurablePullConsumer
from gateway.adapters.jetstream.one_shot import OneShotPublisher
from gateway.adapters.postgres import Pool
from gateway.core.ledger.port import Ledger
from gateway.dependency_watch import DependencyWatch
from gateway.metrics import Metrics
from gateway.settings import ProviderSettings, Settings, SettlementSettings
from gateway.settlement.settler import Settler


@dataclass
class SettlementParts:
    """What the settlement worker (and DLQ replay of settlement rows) needs."""

    #: The whole settings, not a section: the worker, its ordered gate and its rounds
    #: read `[settlement]`, `[ledger]`, `[ordering]`, the providers and the database URL.
    settings: Settings
    pool: Pool
    broker: JetStreamBroker
    ledger: Ledger
    settler: Settler
    metrics: Metrics
    consumer: DurablePullConsumer  # bound by the worker when it starts; replay never does
    alerts: AlertWebhook | None = None  # None: `[alerts] webhook_url` is not set
    #: What the worker sees of its dependencies and retries, for the console's overview.
    watch: DependencyWatch = field(default_factory=DependencyWatch.idle)


@dataclass
class ReconcileParts:
    """What one `gateway reconcile` pass needs: the database and a publisher that connects
    to NATS only if the pass finds something to re-publish."""

    #: Which events settle: each provider's scheme, and `[settlement] subjects`.
    providers: Mapping[str, ProviderSettings]
    settlement: SettlementSettings
    pool: Pool
    publisher: OneShotPublisher
