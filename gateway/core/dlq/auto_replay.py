"""Automatic re-drive of dead letters: which open rows are due for a replay of their own,
now that the dependency they failed on answers again. Pure: the rows, the dependencies
found answering and the time come in as arguments.

A row is re-driven automatically only when all of these hold:

1. its error class is one of `[dlq] auto_replay_classes`, each of which waits on one
   dependency (`WAITS_ON`): a class not in that table (a permanent one, say) is never
   re-driven, and the settings refuse it at start-up;
2. that dependency answered the round's probe;
3. it has had fewer than `auto_replay_max` automatic replays;
4. its last automatic replay is at least `auto_replay_backoff_s * 2 ** (n - 1)` ago
   (n: its automatic replays so far), so a dependency that answers the probe yet still
   fails the row does not spend the row's attempts in a few rounds;
5. the round has not yet taken `auto_replay_per_round` rows.

Within a round, a replay that fails again with a class waiting on a dependency says the
dependency is away again (`down_again`): the round stops taking that dependency's rows.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from gateway.core.health.dependencies import Dependency
from gateway.errors import ErrorClass

#: The classes a row may be re-driven automatically for, and the dependency each waited
#: on. Only failures that a dependency coming back cures are here: the transient rate and
#: ledger codes, NATS away, and the outbox's publishing given up (its cause is the broker;
#: a body the broker can never take is `PAYLOAD_TOO_LARGE`, not this). The dependencies
#: are those the console's overview shows (`core.health.dependencies`); the database is not one
#: here: a round that can read the dead letters has it.
WAITS_ON: Mapping[str, Dependency] = MappingProxyType(
    {
        ErrorClass.RATE_UNAVAILABLE.value: Dependency.CURRENCY_SERVICE,
        ErrorClass.RATE_STALE.value: Dependency.CURRENCY_SERVICE,
        ErrorClass.RATE_SERVICE_UNAVAILABLE.value: Dependency.CURRENCY_SERVICE,
        ErrorClass.LEDGER_UNAVAILABLE.value: Dependency.LEDGER,
        ErrorClass.BROKER_UNAVAILABLE.value: Dependency.NATS,
        ErrorClass.PUBLISH_ATTEMPTS_EXHAUSTED.value: Dependency.NATS,
    }
)
#: `[dlq] auto_replay_classes` by default: every class a dependency's return cures.
DEFAULT_CLASSES: tuple[str, ...] = tuple(WAITS_ON)


class AutoOutcome(enum.StrEnum):
    """What one automatic re-drive did (the `outcome` label of its metric)."""

    REPLAYED = "replayed"  # the stage ran again and the row is resolved
    FAILED = "failed"  # it failed again; the row keeps the new error and one more attempt
    SKIPPED = "skipped"  # another replay held or had resolved the row meanwhile


@dataclass(frozen=True)
class AutoReplayPolicy:
    """`[dlq]`'s automatic re-drive, as the decision reads it."""

    classes: frozenset[str]
    max_per_row: int
    per_round: int
    backoff_s: float


@dataclass(frozen=True)
class Candidate:
    """An open dead letter of a replayable stage, as the round's query reads it."""

    id: int
    error_class: str
    auto_replays: int
    last_auto_replay_at: datetime | None


def is_due(row: Candidate, policy: AutoReplayPolicy, now: datetime) -> bool:
    """Whether `row` may be re-driven automatically at `now`, its dependency answering:
    its class is configured, its automatic replays are not spent, and its backoff
    (doubling with each automatic replay) has passed. A row never re-driven is due."""
    if row.error_class not in policy.classes or row.error_class not in WAITS_ON:
        return False
    if row.auto_replays >= policy.max_per_row:
        return False
    if row.auto_replays == 0 or row.last_auto_replay_at is None:
        return True
    wait_s = policy.backoff_s * 2.0 ** (row.auto_replays - 1)
    # Compared in seconds, not as a `timedelta`: with `auto_replay_max` up to 100 the wait
    # reaches 60 s * 2**98, past what a `timedelta` holds (OverflowError stopped every
    # round from its 42nd replay of a row on); a float holds it, as no wait at all.
    return (now - row.last_auto_replay_at).total_seconds() >= wait_s


def due(
    rows: Iterable[Candidate],
    answering: Collection[Dependency],
    policy: AutoReplayPolicy,
    now: datetime,
) -> list[Candidate]:
    """The rows to re-drive this round, in the order given (the replay order), at most
    `policy.per_round` of them; see the module docstring."""
    taken: list[Candidate] = []
    for row in rows:
        if len(taken) >= policy.per_round:
            break
        dependency = WAITS_ON.get(row.error_class)
        if dependency is None or dependency not in answering:
            continue
        if is_due(row, policy, now):
            taken.append(row)
    return taken


def down_again(failed_class: str | None) -> Dependency | None:
    """The dependency a failed re-drive says is away again, if its new class waits on one."""
    return None if failed_class is None else WAITS_ON.get(failed_class)


def unknown_classes(classes: Sequence[str]) -> list[str]:
    """The names in `classes` that cannot be re-driven automatically (for the settings)."""
    return [c for c in classes if c not in WAITS_ON]
