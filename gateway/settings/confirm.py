"""`[confirm]`: the confirm stage, `gateway confirm`, which fetches what a webhook only
names (Mollie's classic `id=tr_…`) from its provider's API and records the events the
answer holds. Each provider that needs it is paced and bounded on its own; its API key
and host rules are backfill's (`[providers.NAME] api_key_env`, `api_url`, `api_hosts`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.core.confirm.decisions import ConfirmPolicy
from gateway.errors import ConfigError

#: The bounds of `[confirm]`'s numbers: (key, low, high). The reader has already refused
#: a value that is not positive and finite.
BOUNDS: tuple[tuple[str, float, float], ...] = (
    ("rate_per_s", 0.1, 10_000),
    ("concurrency", 1, 256),
    ("batch", 1, 1_000),
    ("lease_s", 5, 3_600),
    ("poll_s", 0.05, 60),
    ("max_attempts", 1, 1_000),
    ("first_delay_s", 0.1, 3_600),
    ("max_delay_s", 0.1, 86_400),
)


@dataclass(frozen=True)
class ConfirmSettings:
    """How `gateway confirm` fetches: per provider at most `rate_per_s` requests a
    second and `concurrency` at once; a transient answer (a timeout, 429, 5xx, 401 or
    403) is tried again after a delay doubling from `first_delay_s` to `max_delay_s`
    (±20 % jitter), and parked at stage `confirm` after `max_attempts` tries. Pending
    fetches wait in PostgreSQL, not in memory: a restart resumes them."""

    #: Requests a second to one provider's API, at most.
    #: allowed: 0.1 to 10000
    rate_per_s: float = 20.0
    #: Requests to one provider's API under way at once, at most.
    #: allowed: 1 to 256
    concurrency: int = 8
    #: Pending fetches one claim takes from the database.
    #: allowed: 1 to 1000
    batch: int = 100
    #: Seconds a claimed fetch is the claimer's; past it (the process died), another
    #: process may take it.
    #: allowed: 5 to 3600, and more than each confirmed provider's `api_timeout_s`
    lease_s: float = 300.0
    #: Seconds between looks at the database while nothing is due.
    #: allowed: 0.05 to 60
    poll_s: float = 0.5
    #: Tries of one fetch before it is parked (`CONFIRMATION_ATTEMPTS_EXHAUSTED`).
    #: allowed: 1 to 1000
    max_attempts: int = 40
    #: Seconds before the second try.
    #: allowed: 0.1 to 3600
    first_delay_s: float = 1.0
    #: The longest delay between two tries (40 tries at the defaults span about 2.5 h).
    #: allowed: 0.1 to 86400
    max_delay_s: float = 300.0
    #: The address `gateway confirm` serves `/metrics` on.
    metrics_host: str = "127.0.0.1"
    #: The port of `gateway confirm`'s `/metrics`; 0: off.
    #: allowed: 0 to 65535
    metrics_port: int = 9105

    @property
    def policy(self) -> ConfirmPolicy:
        """The retry rules as the pure decision reads them."""
        return ConfirmPolicy(self.max_attempts, self.first_delay_s, self.max_delay_s)


def parse_confirm(
    data: Mapping[str, Any], read: Callable[[type, Mapping[str, Any], str], Any]
) -> ConfirmSettings:
    """`[confirm]` read by `read` (the config's section reader), then its bounds."""
    confirm: ConfirmSettings = read(ConfirmSettings, data, "confirm")
    for key, low, high in BOUNDS:
        value = getattr(confirm, key)
        if not low <= value <= high:
            raise ConfigError(f"confirm.{key}", f"must be {low:g} to {high:g}, got {value:g}")
    if confirm.max_delay_s < confirm.first_delay_s:
        raise ConfigError("confirm.max_delay_s", "must be at least confirm.first_delay_s")
    if not 0 <= confirm.metrics_port <= 65_535:
        raise ConfigError("confirm.metrics_port", "must be 0 to 65535")
    return confirm
