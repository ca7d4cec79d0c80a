"""What a backfill run works with (`BackfillParts`, opened by the composition root) and
what it reports (`BackfillReport`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.adapters.jetstream.one_shot import OneShotPublisher
from gateway.adapters.postgres import Pool
from gateway.adapters.provider_api import EventSource
from gateway.core.backfill.decisions import Outcome, Tally, Window
from gateway.core.events.model import OrderedSubject
from gateway.metrics import Metrics
from gateway.settings import ProviderSettings
from gateway.settings.provider_api import ApiLimits
from gateway.settings.sections import HttpSettings

#: The most event ids, and the most failure lines, a report lists (the counts are always
#: complete): a provider answering garbage for a whole window must not grow the report
#: (and the JSON printed at the end) with every entry.
LISTED_MAX = 1000


@dataclass
class BackfillParts:
    """What a run works with; the composition root opens and closes them."""

    pool: Pool
    source: EventSource
    provider: ProviderSettings
    metrics: Metrics
    publisher: OneShotPublisher | None = None  # None: leave publishing to the relay
    sleep: Callable[[float], Awaitable[None]] | None = None
    monotonic: Callable[[], float] = time.monotonic
    #: `http.max_body_bytes`: a longer body is recorded and parked, never published.
    max_body_bytes: int = HttpSettings().max_body_bytes
    #: Which subjects' events get an ordering key, as on the live path (None: none).
    ordered: OrderedSubject | None = None

    @property
    def limits(self) -> ApiLimits:
        api = self.provider.api
        return api.limits if api is not None else ApiLimits()


@dataclass
class BackfillReport:
    """The summary: fetched, present, recovered, failed (and what was listed)."""

    provider: str
    window: Window
    dry_run: bool
    tally: Tally = field(default_factory=Tally)
    unpublished: int = 0  # recorded but left to the outbox relay (NATS did not ack)
    continued: list[Window] = field(default_factory=list)  # unfinished runs continued
    events: list[dict[str, Any]] = field(default_factory=list)  # recovered / would
    errors: list[str] = field(default_factory=list)  # one line per failed event (capped)
    errors_left_off: int = 0  # failure lines beyond LISTED_MAX, counted, not kept
    #: Why the pass stopped before the end of its window (a bound), None if it did not.
    stopped: str | None = None
    skipped: list[str] = field(default_factory=list)  # one line per page given up
    pages: int = 0  # pages read by this pass

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "since": self.window.since.isoformat(),
            "until": self.window.until.isoformat(),
            "types": list(self.window.types),
            "dry_run": self.dry_run,
            **self.tally.to_json(),
            "unpublished": self.unpublished,
            "continued": [
                {"since": w.since.isoformat(), "until": w.until.isoformat()} for w in self.continued
            ],
            "events": self.events,
            "errors": self.errors,
            "errors_left_off": self.errors_left_off,
            "pages": self.pages,
            "stopped": self.stopped,
            "skipped": self.skipped,
        }

    def failed(self, line: str) -> None:
        """Note one failed event's line (up to `LISTED_MAX`; beyond, only counted)."""
        if len(self.errors) < LISTED_MAX:
            self.errors.append(line)
        else:
            self.errors_left_off += 1

    def listed(self, event_id: str, event_type: str | None, outcome: Outcome) -> None:
        """Name one event in the report (up to `LISTED_MAX`)."""
        if len(self.events) < LISTED_MAX:
            self.events.append(
                {"event_id": event_id, "event_type": event_type, "outcome": outcome.value}
            )
