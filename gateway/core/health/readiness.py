"""What `/readyz` answers for the processes without a web server of their own (`settle`,
`forward`, `dlq run-jobs`) and for the console: each dependency the process uses is
probed, and the answer is 200 when every one answered, else 503 with a short code per
dependency that did not.

The codes are the whole story a probe gets: never a host, a URL or a setting's value,
because the listener that serves them has no credentials (and the console's is its
public port). Which host a process could not reach is in its log.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

# The dependencies are the overview's and `gateway_dependency_up`'s: one list, one
# spelling, in `/readyz`'s body as in the dependency table.
from gateway.core.health.dependencies import Dependency

__all__ = ["UNREACHABLE", "Dependency", "NotReady", "Readiness", "liveness", "readiness"]


class NotReady(enum.StrEnum):
    """Why `/readyz` answers 503: the codes in its `reasons`, a contract for alert rules
    and runbooks."""

    #: The process is still opening its connections (its listener is bound first).
    STARTING = "starting"
    DATABASE_UNREACHABLE = "database_unreachable"
    NATS_UNREACHABLE = "nats_unreachable"
    LEDGER_UNREACHABLE = "ledger_unreachable"
    CURRENCY_SERVICE_UNREACHABLE = "currency_service_unreachable"


class Readiness(Protocol):
    """What `/readyz` asks, on the plain listener and on the console's port alike
    (`wiring.health.Health`): its status and JSON body."""

    async def ready(self) -> tuple[int, dict[str, object]]: ...


#: The code said when a dependency does not answer its probe.
UNREACHABLE: Mapping[Dependency, NotReady] = {
    Dependency.DATABASE: NotReady.DATABASE_UNREACHABLE,
    Dependency.NATS: NotReady.NATS_UNREACHABLE,
    Dependency.LEDGER: NotReady.LEDGER_UNREACHABLE,
    Dependency.CURRENCY_SERVICE: NotReady.CURRENCY_SERVICE_UNREACHABLE,
}


def readiness(answered: Mapping[Dependency, bool] | None) -> tuple[int, dict[str, object]]:
    """Status and body of `/readyz` from each probed dependency's answer; None while the
    process has not opened its dependencies yet.

    200 `{"status": "ready", "database": true, ...}` when all answered; otherwise 503
    `{"status": "not_ready", ..., "reasons": [codes]}`, the codes in the order the
    dependencies were given.
    """
    if answered is None:
        return 503, {"status": "not_ready", "reasons": [NotReady.STARTING.value]}
    reasons = [UNREACHABLE[d].value for d, ok in answered.items() if not ok]
    body: dict[str, object] = {"status": "not_ready" if reasons else "ready"}
    body.update({d.value: ok for d, ok in answered.items()})
    if reasons:
        body["reasons"] = reasons
    return (503 if reasons else 200), body


def liveness() -> tuple[int, dict[str, object]]:
    """`/livez`: answered by the process's own event loop, so answering is the check (a
    loop blocked by a stuck call answers nothing, and the probe's timeout says so)."""
    return 200, {"status": "alive"}
