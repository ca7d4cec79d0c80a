"""One forwarding destination as `gateway forward` runs it: checked once, immutable."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gateway.core.forward_filters import ForwardFilter
from gateway.core.forward_request import ResignAs

#: A destination's name is part of a consumer name and of a dead-letter stage.
MAX_NAME_CHARS = 64
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
#: Events sent at once, at most (the stream's pending limit follows it).
MAX_IN_FLIGHT = 256


class Output(enum.StrEnum):
    """What a person sees: one line per attempt, NDJSON, or nothing but the summary."""

    LINES = "lines"
    JSON = "json"
    QUIET = "quiet"


class Start(enum.StrEnum):
    """Where a new consumer starts in the stream (an existing durable one resumes)."""

    NOW = "now"
    START = "start"
    TIME = "time"


@dataclass(frozen=True)
class ForwardOptions:
    """Everything one forwarder needs, as `--flags` or a `[forward.NAME]` table set it."""

    url: str = field(repr=False)  # may carry a credential in its query: never printed
    name: str | None = None  # durable when named; ephemeral from now when not
    filters: ForwardFilter = field(default_factory=ForwardFilter)
    start: Start = Start.NOW
    start_time_iso: str | None = None  # with Start.TIME
    ordered: bool = True
    max_in_flight: int = 16
    timeout_s: float = 15.0
    schedule: tuple[float, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)
    resign_as: ResignAs = ResignAs.STANDARD
    envelope: bool = False
    output: Output = Output.LINES
    verify_tls: bool = True
    park_on_4xx: bool = False
    fail_first: int = 0  # answer as a 503 for each event's first N attempts, sending nothing

    @property
    def destination(self) -> str:
        """The name attempts and dead letters are filed under."""
        return self.name or "listen"


def check_name(name: str) -> str:
    """A destination name; ValueError unless it is 1-64 of a-z, 0-9, `-` and `_`."""
    if not name or len(name) > MAX_NAME_CHARS or not set(name) <= _NAME_CHARS:
        raise ValueError(
            f"{name!r}: a destination name is 1-{MAX_NAME_CHARS} of a-z, 0-9, '-' and '_'"
        )
    return name


def check_url(url: str) -> str:
    """An http or https URL with a host; ValueError saying what is wrong (never
    repeating the URL, which may hold a credential)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("the target must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("the target URL has no host")
    return url
