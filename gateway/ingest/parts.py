"""What the HTTP surface of `gateway serve` talks to while it runs: plain ports.

The composition root (`gateway.wiring.ingest`) builds these from PostgreSQL and NATS;
the endpoint unit tests build them from in-memory fakes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.events.model import Event, Outcome
from gateway.ingest.certified import CertificateFetcher
from gateway.metrics import Metrics
from gateway.settings import HttpSettings, IngestSettings, TracingSettings


class Inbox(Protocol):
    """The idempotency gate as the HTTP handlers and the composition root see it."""

    async def accept(self, event: Event) -> Outcome:
        """Record the event durably; say whether it was new. Raises TransientError."""
        ...

    async def close(self) -> None:
        """Commit what is queued, then stop."""
        ...


class Probe(Protocol):
    """A dependency `/readyz` asks after (the database, the broker)."""

    async def ping(self) -> bool:
        """True when the dependency answers now; never raises."""
        ...


@dataclass
class IngestParts:
    """The running parts the endpoints use, for one serving process."""

    #: The request deadline, the body limit and the `Retry-After` of a 503.
    http: HttpSettings
    #: The commit deadline.
    ingest: IngestSettings
    #: Whether an incoming trace is joined.
    tracing: TracingSettings
    inbox: Inbox
    database: Probe
    broker: Probe
    metrics: Metrics
    #: The certificate fetchers of the providers that sign with one (PayPal), by name.
    certificates: dict[str, CertificateFetcher] = field(default_factory=dict)
