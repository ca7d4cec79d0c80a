"""`[dlq]`: the dead-letter table's automatic re-drive, run by `gateway dlq run-jobs`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.core.dlq.auto_replay import (
    DEFAULT_CLASSES,
    WAITS_ON,
    AutoReplayPolicy,
    unknown_classes,
)
from gateway.errors import ConfigError

#: The bounds of `[dlq]`'s numbers: (key, low, high). The reader has already refused a
#: value that is not positive and finite. A round holds its lock and a pooled connection
#: from its first row to its last, so its pace and its probes' deadline are bounded too:
#: at the smallest rate one might write by mistake (1e-9/s) its second row would wait
#: decades, and no other process could run a round meanwhile.
BOUNDS: tuple[tuple[str, float, float], ...] = (
    ("auto_replay_max", 1, 100),
    ("auto_replay_per_round", 1, 10_000),
    ("auto_replay_rate_per_s", 0.1, 1_000),
    ("auto_replay_interval_s", 0, 86_400),
    ("auto_replay_backoff_s", 0, 86_400),
    ("auto_replay_probe_timeout_s", 0.1, 60),
)


@dataclass(frozen=True)
class DlqSettings:
    """Dead letters re-driven without a person: rows parked because a dependency was away
    (the currency-service, the ledger, NATS) are replayed by `gateway dlq run-jobs` once
    that dependency answers again, with the same code as `gateway dlq replay`, paced,
    capped per row and per round, each replay audited with `via = auto`."""

    #: Re-drive the rows of `auto_replay_classes` automatically. Off: only a person
    #: replays dead letters (`gateway dlq replay`, or a job planned in the console).
    auto_replay: bool = True
    #: The error classes re-driven automatically; each waits on one dependency, probed
    #: before its rows are tried.
    #: allowed: any of `RATE_UNAVAILABLE`, `RATE_STALE`, `RATE_SERVICE_UNAVAILABLE`
    #:   (currency-service), `LEDGER_UNAVAILABLE` (ledger), `BROKER_UNAVAILABLE`,
    #:   `PUBLISH_ATTEMPTS_EXHAUSTED` (NATS)
    auto_replay_classes: tuple[str, ...] = DEFAULT_CLASSES
    #: Automatic replays of one row at most; past it only a person replays the row.
    #: allowed: 1 to 100
    auto_replay_max: int = 3
    #: Rows one round re-drives at most, all dependencies together.
    #: allowed: 1 to 10000
    auto_replay_per_round: int = 100
    #: Rows per second a round re-drives at most, so a dependency that just came back
    #: is not flooded by its backlog.
    #: allowed: 0.1 to 1000
    auto_replay_rate_per_s: float = 5.0
    #: Seconds between rounds (the first one this long after `run-jobs` starts).
    #: allowed: up to 86400
    auto_replay_interval_s: float = 30.0
    #: Seconds a row waits after its first automatic replay failed before the next one,
    #: doubling with each further one.
    #: allowed: up to 86400
    auto_replay_backoff_s: float = 60.0
    #: The deadline of one probe of a dependency before its rows are tried.
    #: allowed: 0.1 to 60
    auto_replay_probe_timeout_s: float = 2.0

    @property
    def policy(self) -> AutoReplayPolicy:
        """The settings as the pure decision reads them."""
        return AutoReplayPolicy(
            classes=frozenset(self.auto_replay_classes),
            max_per_row=self.auto_replay_max,
            per_round=self.auto_replay_per_round,
            backoff_s=self.auto_replay_backoff_s,
        )


def parse_dlq(
    data: Mapping[str, Any], read: Callable[[type, Mapping[str, Any], str], Any]
) -> DlqSettings:
    """`[dlq]` read by `read` (the config's section reader), then its own rules."""
    dlq: DlqSettings = read(DlqSettings, data, "dlq")
    for key, low, high in BOUNDS:
        value = getattr(dlq, key)
        if not low <= value <= high:
            raise ConfigError(f"dlq.{key}", f"must be {low:g} to {high:g}, got {value:g}")
    unknown = unknown_classes(dlq.auto_replay_classes)
    if unknown:
        allowed = ", ".join(WAITS_ON)
        raise ConfigError(
            "dlq.auto_replay_classes",
            f"{unknown[0]!r} cannot be re-driven automatically (no dependency's return "
            f"cures it); allowed: {allowed}",
        )
    return dlq
