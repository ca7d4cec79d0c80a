"""The in-process alerts' decisions: settings, thresholds, the retry rate, and the episode
state machine that notifies once when a condition starts and once when it clears.

Pure: time comes in as arguments; the caller fetches counts and stores the states.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class AlertState(enum.StrEnum):
    """What the webhook receiver was last told about one alert."""

    OK = "ok"
    FIRING = "firing"


class Rule(enum.StrEnum):
    """The team's thresholds, as names in notifications and in `dlq_alert_state.rule`."""

    DLQ_BURST = "dlq_burst"  # more than N rows parked within the window
    DLQ_STALE = "dlq_stale"  # an unresolved row older than the limit
    RETRY_STORM = "retry_storm"  # more than N retries a minute on one subject
    BACKFILL_PAGE_SKIPPED = "backfill_page_skipped"  # a provider's backfill gave a page up
    DEPENDENCY_DOWN = "dependency_down"  # a dependency seen down for longer than the limit


# Read and checked with the rest of the settings (`gateway.settings.parse`).
@dataclass(frozen=True)
class AlertSettings:
    """`[alerts]`: where notifications go, how often to look, and the thresholds."""

    #: Where notifications are POSTed as JSON, once when a condition starts and once
    #: when it clears. Empty = no notifications (the DLQ gauges are still kept).
    #: allowed: an `http://` or `https://` URL, or empty
    webhook_url: str = ""
    #: How often the conditions are evaluated.
    interval_s: float = 30.0
    #: The deadline of one notification POST.
    timeout_s: float = 5.0
    #: Alert when more than this many rows are parked within `dlq_window_s`.
    dlq_rows_max: int = 10
    #: The window `dlq_rows_max` counts over.
    dlq_window_s: float = 300.0
    #: Alert when an unresolved dead-letter row is older than this.
    oldest_unresolved_max_s: float = 3600.0
    #: Alert when one subject sees more than this many retries a minute.
    retries_per_minute_max: float = 50.0


def settings_named(s: AlertSettings) -> dict[str, Any]:
    """The thresholds an evaluation judged with, as a notice names them (the receiver's
    URL is left out: it may carry a token), and a short digest to compare processes by."""
    named: dict[str, Any] = {
        "interval_s": s.interval_s,
        "dlq_rows_max": s.dlq_rows_max,
        "dlq_window_s": s.dlq_window_s,
        "oldest_unresolved_max_s": s.oldest_unresolved_max_s,
        "retries_per_minute_max": s.retries_per_minute_max,
    }
    text = ",".join(f"{k}={v!r}" for k, v in sorted(named.items()))
    named["digest"] = hashlib.sha256(text.encode()).hexdigest()[:12]
    return named


@dataclass(frozen=True)
class Reading:
    """One judged condition: its current value against its threshold."""

    rule: Rule
    key: str  # the subject for RETRY_STORM, else ""
    value: float
    threshold: float
    active: bool
    summary: str


#: A skipped backfill page keeps its alert firing this long (as GatewayBackfillPageSkipped).
BACKFILL_SKIP_WINDOW_S = 3600.0
#: A dependency seen down this long is alerted on (as GatewayDependencyDown's `for: 2m`).
DEPENDENCY_DOWN_FOR_S = 120.0


@dataclass(frozen=True)
class Observation:
    """The figures one evaluation judges."""

    dlq_rows_in_window: int
    oldest_unresolved_s: float | None
    retries_per_minute: Mapping[str, float]  # only subjects this process saw retried
    #: Backfill pages skipped in the last `BACKFILL_SKIP_WINDOW_S`, by provider (every
    #: provider with a skipped progress row still kept, so a quiet one can resolve).
    backfill_skipped: Mapping[str, int] = field(default_factory=dict)
    #: Every dependency with a recorded state: seconds it has been down (0: up).
    dependencies_down_s: Mapping[str, float] = field(default_factory=dict)


def readings(obs: Observation, s: AlertSettings) -> list[Reading]:
    """Judge every condition; one reading per rule (and per retried subject)."""
    oldest_s = obs.oldest_unresolved_s or 0.0
    found = [
        Reading(
            Rule.DLQ_BURST,
            "",
            obs.dlq_rows_in_window,
            s.dlq_rows_max,
            obs.dlq_rows_in_window > s.dlq_rows_max,
            f"{obs.dlq_rows_in_window} rows parked in the DLQ in the last "
            f"{s.dlq_window_s:g} s (threshold {s.dlq_rows_max})",
        ),
        Reading(
            Rule.DLQ_STALE,
            "",
            oldest_s,
            s.oldest_unresolved_max_s,
            oldest_s > s.oldest_unresolved_max_s,
            f"oldest unresolved DLQ row is {oldest_s:.0f} s old "
            f"(threshold {s.oldest_unresolved_max_s:g} s)",
        ),
    ]
    for subject, per_minute in sorted(obs.retries_per_minute.items()):
        found.append(
            Reading(
                Rule.RETRY_STORM,
                subject,
                per_minute,
                s.retries_per_minute_max,
                per_minute > s.retries_per_minute_max,
                f"{per_minute:.0f} retries a minute on {subject} "
                f"(threshold {s.retries_per_minute_max:g})",
            )
        )
    for provider, skipped in sorted(obs.backfill_skipped.items()):
        found.append(
            Reading(
                Rule.BACKFILL_PAGE_SKIPPED,
                provider,
                skipped,
                0,
                skipped > 0,
                f"{skipped} {provider} backfill pages skipped in the last "
                f"{BACKFILL_SKIP_WINDOW_S:g} s after failing every pass; part of their "
                "windows was not read",
            )
        )
    for dependency, down_s in sorted(obs.dependencies_down_s.items()):
        found.append(
            Reading(
                Rule.DEPENDENCY_DOWN,
                dependency,
                down_s,
                DEPENDENCY_DOWN_FOR_S,
                down_s > DEPENDENCY_DOWN_FOR_S,
                f"{dependency} has been down for {down_s:.0f} s, as the worker processes "
                f"see it (threshold {DEPENDENCY_DOWN_FOR_S:g} s); events needing it are "
                "being retried",
            )
        )
    return found


@dataclass(frozen=True)
class Notice:
    """A message for the webhook receiver: an episode started or ended."""

    reading: Reading
    state: AlertState  # the new state: FIRING starts an episode, OK ends it
    since: datetime  # when the episode started (FIRING) or ended (OK)
    started_at: datetime | None = None  # for OK: when the episode had started

    def payload(self, source: str) -> dict[str, Any]:
        """The JSON body; `text` makes it readable by Slack-style incoming webhooks."""
        r = self.reading
        prefix = "FIRING" if self.state is AlertState.FIRING else "RESOLVED"
        return {
            "status": "firing" if self.state is AlertState.FIRING else "resolved",
            "alert": r.rule.value,
            "key": r.key,
            "value": r.value,
            "threshold": r.threshold,
            "summary": r.summary,
            "started_at": (self.started_at or self.since).isoformat(),
            "resolved_at": self.since.isoformat() if self.state is AlertState.OK else None,
            "source": source,
            "text": f"[{prefix}] gateway {r.rule.value}: {r.summary}",
        }


def transition(
    previous: AlertState, previous_since: datetime | None, reading: Reading, now: datetime
) -> Notice | None:
    """The notice owed when the receiver's last news no longer matches the condition.

    Nothing while a condition holds or stays clear, so one episode is one FIRING and one
    OK however many evaluations it lasts. A notice that could not be delivered is simply
    owed again at the next evaluation, since the stored state did not change.
    """
    if reading.active and previous is AlertState.OK:
        return Notice(reading, AlertState.FIRING, now)
    if not reading.active and previous is AlertState.FIRING:
        return Notice(reading, AlertState.OK, now, started_at=previous_since)
    return None


class RetryWindow:
    """Cumulative retry counts sampled over time, turned into retries a minute per subject."""

    def __init__(self, window_s: float = 60.0) -> None:
        self._window_s = window_s
        self._samples: list[tuple[float, dict[str, float]]] = []

    def add(self, now_s: float, counts: Mapping[str, float]) -> None:
        self._samples.append((now_s, dict(counts)))
        # Keep the newest sample at least a window old as the base; drop older ones.
        while len(self._samples) > 2 and self._samples[1][0] <= now_s - self._window_s:
            self._samples.pop(0)

    def per_minute(self) -> dict[str, float]:
        """Retries a minute per subject between the base sample and the newest one."""
        if len(self._samples) < 2:
            return {}
        (base_s, base), (now_s, current) = self._samples[0], self._samples[-1]
        elapsed_s = now_s - base_s
        if elapsed_s <= 0:
            return {}
        rates = {}
        for subject, count in current.items():
            before = base.get(subject, 0.0)
            added = count - before if count >= before else count  # a counter reset
            rates[subject] = added * 60.0 / elapsed_s
        return rates
