"""The dependencies a payment waits on, and the decisions about their state: which one an
error class blames, and when a process's observation is worth writing down.

Pure: time comes in as an argument. The worker processes observe (`gateway settle`, the
relay of `gateway serve`), `gateway.dependency_watch` keeps and writes, the console and
the alerts read (`dependency_state`, sql/027).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.errors import ErrorClass


class Dependency(enum.StrEnum):
    """What the gateway waits on, as `dependency_state.dependency` and the
    `gateway_dependency_up{dependency}` label name it."""

    CURRENCY_SERVICE = "currency-service"
    LEDGER = "ledger"
    NATS = "nats"
    DATABASE = "database"


class Health(enum.StrEnum):
    """A dependency's state as last observed."""

    UP = "up"
    DOWN = "down"


#: The error classes that say a dependency did not answer (every one transient: these are
#: the events a dependency's recovery lets through). A class missing here blames none.
BLAMED: Mapping[str, Dependency] = {
    ErrorClass.RATE_SERVICE_UNAVAILABLE.value: Dependency.CURRENCY_SERVICE,
    ErrorClass.RATE_UNAVAILABLE.value: Dependency.CURRENCY_SERVICE,
    ErrorClass.RATE_STALE.value: Dependency.CURRENCY_SERVICE,
    ErrorClass.LEDGER_UNAVAILABLE.value: Dependency.LEDGER,
    ErrorClass.BROKER_UNAVAILABLE.value: Dependency.NATS,
    ErrorClass.DATABASE_UNAVAILABLE.value: Dependency.DATABASE,
}

#: A state a process keeps seeing is written again this often, so `checked_at` stays
#: recent and a state another process wrote is corrected within this time.
REASSERT_S = 30.0


def blamed(error_class: str) -> Dependency | None:
    """The dependency an error class says did not answer, or None."""
    return BLAMED.get(error_class)


@dataclass(frozen=True)
class Seen:
    """What one process last wrote about a dependency."""

    health: Health
    written_at_s: float  # monotonic


def worth_writing(
    last: Seen | None, health: Health, now_s: float, reassert_s: float = REASSERT_S
) -> bool:
    """Whether an observation should be written: a change from what this process last
    wrote (or its first), or the same state after `reassert_s`."""
    if last is None or last.health is not health:
        return True
    return now_s - last.written_at_s >= reassert_s
