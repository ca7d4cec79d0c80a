"""When a stream worker steps aside from a database that stopped answering, and when it
comes back (`adapters.postgres.liveness.DatabaseWatch` runs these decisions).

Workers share their durable consumer: a message one of them holds is one the others
cannot take. A worker whose database went silent (its machine lost, a network cut) used
to keep fetching, wait out the statement timeout with every batch, and hand the batch
back with a growing delay: with one of two settlement workers black-holed, the slowest
of 20 payments took 28-63 s to settle instead of about 1 s. Stepping aside, it stops
fetching and hands what it holds back at once, so a healthy worker takes it.

A slow batch is not proof: a loaded database is slow, not gone, and a worker that
stepped aside from it would only add redeliveries. So a batch waiting longer than
`suspect_after_s` (or a statement that failed for want of the database) is a reason to
ask, and the question is a cheap probe on a fresh connection (`SELECT 1`): unanswered
within `probe_timeout_s`, the worker steps aside; while aside, it asks again every
`probe_every_s` and comes back with the first answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Footing(StrEnum):
    """Where a worker stands with its database."""

    SERVING = "serving"  # fetching and settling
    ASIDE = "aside"  # not fetching; probing until the database answers


class Move(StrEnum):
    """What a probe's answer makes the worker do."""

    STAY = "stay"  # as it was
    STEP_ASIDE = "step_aside"  # stop fetching, hand back what it holds
    RESUME = "resume"  # fetch again


@dataclass(frozen=True)
class StepAsidePolicy:
    """The thresholds of stepping aside (seconds)."""

    #: A batch waiting this long is a reason to probe. A healthy batch of 512 settles in
    #: about 0.1 s on 2 cores; a busy database answers a probe anyway, so a low value
    #: costs only a connection now and then, and the whole hand-back stays within the
    #: 5 s target (suspect 1 s + probe 1.5 s + the healthy worker's own settling).
    suspect_after_s: float = 1.0
    #: How long the probe (connect and `SELECT 1` on a fresh connection) may take. A
    #: fresh connection on the same machine answers in a few milliseconds; 1.5 s leaves
    #: room for a loaded one.
    probe_timeout_s: float = 1.5
    #: The least time between two probes, serving or aside.
    probe_every_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("suspect_after_s", "probe_timeout_s", "probe_every_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")


def probe_due(
    footing: Footing,
    oldest_wait_s: float | None,
    since_probe_s: float,
    suspected: bool,
    policy: StepAsidePolicy,
) -> bool:
    """Whether to probe the database now.

    `oldest_wait_s`: how long the oldest batch in hand has been under way (None: none);
    `since_probe_s`: since the last probe ended; `suspected`: a statement failed for
    want of the database since then.
    """
    if since_probe_s < policy.probe_every_s:
        return False
    if footing is Footing.ASIDE:
        return True
    return suspected or (oldest_wait_s is not None and oldest_wait_s >= policy.suspect_after_s)


def after_probe(footing: Footing, answered: bool) -> Move:
    """What to do with a probe's answer."""
    if footing is Footing.SERVING:
        return Move.STAY if answered else Move.STEP_ASIDE
    return Move.RESUME if answered else Move.STAY
