"""What the settlement worker (and DLQ replay of settlement rows) works with, opened by
the composition root (`gateway.compose.settlement`)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.adapters.nats import JetStreamBroker
from gateway.adapters.postgres import Pool
from gateway.core.ledger import Ledger
from gateway.metrics import Metrics
from gateway.settings import Settings
from gateway.settlement.settler import Settler


@dataclass
class SettlementParts:
    """What the settlement worker (and DLQ replay of settlement rows) needs."""

    settings: Settings
    pool: Pool
    broker: JetStreamBroker
    ledger: Ledger
    settler: Settler
    metrics: Metrics
