"""Pure decisions of `gateway backfill`: the window, what an API answer means and how
long to wait before asking again, counting outcomes, and rebuilding a GitHub delivery's
exact body. Time and randomness come in as arguments.

How a fetched event is judged (`Outcome`): the provider's API lists it; if its
`(provider, event_id)` is already recorded it is `present`; otherwise it is recorded
through the same gate as a webhook and is `recovered` (or, on a `--dry-run`, it
`would_recover`); anything that stops one event from being recorded is `failed`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from gateway.core.providers.github import GITHUB
from gateway.core.signatures.base import SchemeParams
from gateway.errors import BackfillUsageError, SignatureError


class Outcome(enum.StrEnum):
    """What became of one fetched event."""

    PRESENT = "present"  # already recorded (a webhook, or an earlier backfill, got it)
    RECOVERED = "recovered"  # missing, now recorded and handed to the stream
    WOULD_RECOVER = "would_recover"  # missing; a --dry-run records nothing
    FAILED = "failed"  # could not be fetched or recorded (the run says why)


@dataclass
class Tally:
    """Counts of one run (or one page): fetched = present + recovered + would + failed."""

    fetched: int = 0
    present: int = 0
    recovered: int = 0
    would_recover: int = 0
    failed: int = 0
    #: Recovered GitHub deliveries whose exact bytes could not be rebuilt.
    inexact: int = 0

    def add(self, outcome: Outcome, count: int = 1) -> None:
        self.fetched += count
        setattr(self, outcome.value, getattr(self, outcome.value) + count)

    def merge(self, other: Tally) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, int]:
        return dict(vars(self))


# --- the window ----------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """Events that occurred in [since, until), and the `--type` filter (empty: all)."""

    since: datetime
    until: datetime
    types: tuple[str, ...] = ()

    def holds(self, occurred_at: datetime) -> bool:
        return self.since <= occurred_at < self.until

    def wants(self, event_type: str | None) -> bool:
        return not self.types or (event_type is not None and event_type in self.types)

    @property
    def types_key(self) -> str:
        """The filter as the progress row stores it: sorted, comma-joined."""
        return ",".join(self.types)


def make_window(
    since: datetime, until: datetime | None, types: Iterable[str], now: datetime
) -> Window:
    """The window a run covers; `until` defaults to now. Raise `BackfillUsageError` if
    it is empty or in the future (an open end would make a run's window move)."""
    end = now if until is None else min(until, now)
    if since >= end:
        raise BackfillUsageError(f"--since {since.isoformat()} is not before {end.isoformat()}")
    cleaned = sorted({t.strip() for t in types if t.strip()})
    return Window(since, end, tuple(cleaned))


def trailing_window(now: datetime, window_s: float) -> Window:
    """The window of a scheduled pass: the last `window_s` seconds, whole seconds."""
    end = now.replace(microsecond=0)
    return Window(end - timedelta(seconds=window_s), end)


def passed_window(occurred: Sequence[datetime], window: Window) -> bool:
    """For a newest-first listing: True when the page reached events older than `since`,
    so no later page can hold one inside the window."""
    return bool(occurred) and min(occurred) < window.since


# --- answers from the API ------------------------------------------------------------


class Verdict(enum.StrEnum):
    OK = "ok"
    RETRY = "retry"  # 429, 5xx, a transport error: wait and ask again
    AUTH = "auth"  # 401/403: the credentials; stop at once with one line
    FAIL = "fail"  # any other 4xx: asking again will not help


def verdict(status: int | None) -> Verdict:
    """What an HTTP status means for a read-only API call (None: no answer at all)."""
    if status is None or status == 429 or status >= 500 or status == 408:
        return Verdict.RETRY
    if status in (401, 403):
        return Verdict.AUTH
    if 200 <= status < 300:
        return Verdict.OK
    return Verdict.FAIL


@dataclass(frozen=True)
class ApiRetryPolicy:
    """Backoff for a provider's API: full jitter up to `cap_s`, a `Retry-After` honoured
    up to `max_retry_after_s`, and nothing waited past `deadline_s` of one call."""

    base_s: float = 0.5
    cap_s: float = 30.0
    deadline_s: float = 300.0
    max_retry_after_s: float = 300.0


DEFAULT_API_RETRY = ApiRetryPolicy()


def next_wait_s(
    policy: ApiRetryPolicy,
    attempt: int,
    retry_after_s: float | None,
    elapsed_s: float,
    rand: Callable[[], float],
) -> float | None:
    """The wait before try `attempt + 1` after `attempt` failures, or None to give up.

    A `Retry-After` is the provider telling us when it will answer: it is waited as
    asked (a rate limit resets then; asking sooner only spends the next window). Without
    one, full-jitter exponential backoff. A wait that would end past the deadline, or a
    `Retry-After` longer than `max_retry_after_s`, gives up at once instead of sleeping
    towards a failure.
    """
    if attempt < 1:
        raise ValueError(f"attempt counts failures and starts at 1, got {attempt}")
    if retry_after_s is not None:
        if retry_after_s > policy.max_retry_after_s:
            return None
        wait_s = max(retry_after_s, policy.base_s)  # "0" must not become a busy loop
    else:
        wait_s = rand() * min(policy.cap_s, policy.base_s * 2.0 ** (attempt - 1))
    if elapsed_s + wait_s > policy.deadline_s:
        return None
    return wait_s


# --- GitHub: the delivery's exact bytes ---------------------------------------------


def github_bodies(payload: Any) -> list[bytes]:
    """Serialisations a GitHub delivery's body may have had, most likely first.

    The deliveries API returns the payload parsed, not its bytes. GitHub sends compact
    JSON with non-ASCII characters as UTF-8; the other candidates cover escaped
    non-ASCII and a pretty-printed body.
    """
    compact = orjson.dumps(payload)
    candidates = [compact]
    escaped = _ascii_json(payload, indent=None)
    pretty = _ascii_json(payload, indent=2)
    for extra in (escaped, pretty):
        if extra not in candidates:
            candidates.append(extra)
    return candidates


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape(match: re.Match[str]) -> str:
    units = match.group(0).encode("utf-16-be")  # a surrogate pair beyond the BMP
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def _ascii_json(payload: Any, indent: int | None) -> bytes:
    """JSON with every non-ASCII character as a `\\u` escape (they occur only inside
    strings, so escaping them all is exact), compact or with two-space indents."""
    option = orjson.OPT_INDENT_2 if indent else 0
    return _NON_ASCII.sub(_escape, orjson.dumps(payload, option=option).decode()).encode()


def exact_github_body(
    candidates: Sequence[bytes], signature: str | None, params: SchemeParams
) -> bytes | None:
    """The candidate the delivery's recorded `X-Hub-Signature-256` signs, or None.

    Found, it is the very body the webhook carried (the HMAC under our secret proves
    it), so its digest is the one the live path would record and the replay guard
    holds for it. None when the delivery shows no signature or none matches.
    """
    if not signature:
        return None
    headers = {"x-hub-signature-256": signature}
    for body in candidates:
        try:
            GITHUB.scheme.verify(params, headers, body, 0.0)
        except SignatureError:
            continue
        return body
    return None


def lower_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    """Request headers as the core reads them: names lower-cased, values as text."""
    return {str(k).lower(): str(v) for k, v in headers.items() if v is not None}


@dataclass
class PageState:
    """Where a run stands: the provider's cursor for the next page, and what it counted."""

    cursor: str | None = None
    pages: int = 0
    tally: Tally = field(default_factory=Tally)
    done: bool = False


#: Completed `backfill_progress` rows are kept this long (a week of passes to look at),
#: then deleted by the scheduled pass; at least two intervals, which `pass_due` reads.
KEEP_COMPLETED_S = 7 * 86_400.0


def keep_completed_s(interval_s: float) -> float:
    """How long a provider's completed progress rows are kept, for its interval."""
    return max(KEEP_COMPLETED_S, 2 * interval_s)
