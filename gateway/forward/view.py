"""What a person running `gateway forward` sees: a line (or a JSON object) per attempt,
a rate line now and then on a terminal, and a summary at exit. Pure formatting, plus the
one stream it writes to."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

import orjson

from gateway.core.bodies.content import printable
from gateway.core.forward.retry import Verdict
from gateway.settings.forward import Output

#: How much of a failed answer a line shows.
EXCERPT_CHARS = 200
#: Seconds between rate lines on a terminal.
RATE_EVERY_S = 10.0
#: How each verdict is named where people read it: NDJSON's `outcome` and the
#: `outcome` label of `gateway_forward_attempts_total`.
OUTCOMES = {
    Verdict.DELIVERED: "delivered",
    Verdict.RETRY: "retry",
    Verdict.PARK: "parked",
    Verdict.PAUSE: "paused",
}


@dataclass(frozen=True)
class AttemptSeen:
    """One attempt as it is shown."""

    at: datetime
    provider: str
    event_type: str
    event_id: str
    attempt: int
    status: int | None
    elapsed_s: float
    verdict: Verdict
    delay_s: float = 0.0
    error: str = ""
    excerpt: bytes = b""
    dead_letter_id: int | None = None


@dataclass
class Counts:
    """What one run did, for the summary and the exit code."""

    delivered: int = 0
    retried: int = 0
    parked: int = 0
    filtered: int = 0
    blocked: int = 0
    paused: bool = False
    #: Dead letters of an unnamed run resolved as it stopped (nothing can replay into it).
    resolved: int = 0
    by_status: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        return {
            "delivered": self.delivered,
            "retried": self.retried,
            "parked": self.parked,
            "blocked": self.blocked,
            "filtered": self.filtered,
            "paused": self.paused,
            "resolved": self.resolved,
        }


def attempt_line(seen: AttemptSeen) -> str:
    """`12:03:41  stripe  payment_intent.succeeded  evt_123  → 200  34 ms  (attempt 1)`,
    and for a failure what happens next and the start of the answer."""
    outcome = str(seen.status) if seen.status is not None else seen.error
    line = (
        f"{seen.at:%H:%M:%S}  {seen.provider}  {printable(seen.event_type) or '-'}  "
        f"{printable(seen.event_id)}  → {outcome}  {seen.elapsed_s * 1000:.0f} ms  "
        f"(attempt {seen.attempt})"
    )
    if seen.verdict is Verdict.RETRY:
        line += f"  retry in {_duration(seen.delay_s)}"
    elif seen.verdict is Verdict.PARK:
        line += f"  parked as dead letter {seen.dead_letter_id}"
    elif seen.verdict is Verdict.PAUSE:
        line += "  destination paused"
    if seen.verdict is not Verdict.DELIVERED and seen.excerpt:
        text = _answer_text(seen)
        line += f"  {printable(' '.join(text.split()))}"
    return line


def attempt_json(seen: AttemptSeen) -> str:
    """The attempt as one NDJSON line."""
    return orjson.dumps(
        {
            "at": seen.at.isoformat(),
            "provider": seen.provider,
            "event_type": seen.event_type,
            "event_id": seen.event_id,
            "attempt": seen.attempt,
            "status": seen.status,
            "error": seen.error or None,
            "elapsed_ms": round(seen.elapsed_s * 1000, 1),
            "outcome": OUTCOMES[seen.verdict],
            "retry_in_s": round(seen.delay_s, 3) if seen.verdict is Verdict.RETRY else None,
            "dead_letter_id": seen.dead_letter_id,
            "answer": _answer_text(seen) or None,
        }
    ).decode()


def _answer_text(seen: AttemptSeen) -> str:
    """The start of the target's answer, as text."""
    return seen.excerpt.decode("utf-8", "replace")[:EXCERPT_CHARS]


def summary_line(counts: Counts, elapsed_s: float) -> str:
    """One line at exit."""
    text = (
        f"forwarded {counts.delivered}, retried {counts.retried}, parked {counts.parked}, "
        f"blocked {counts.blocked}, filtered {counts.filtered} in {_duration(elapsed_s)}"
    )
    if counts.resolved:
        text += f"; its {counts.resolved} dead letters resolved as it stopped"
    return text + ("; destination paused (410 Gone)" if counts.paused else "")


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class View:
    """Writes attempts as the output mode says, and rate lines on a terminal."""

    def __init__(self, output: Output, out: TextIO, err: TextIO, *, terminal: bool) -> None:
        self.output = output
        self._out = out
        self._err = err
        self._terminal = terminal
        self._last_rate_s: float | None = None
        self._delivered_at_last = 0

    def say(self, text: str) -> None:
        """A line for the person (the banner, listen's secret): on stdout with the
        lines, on stderr otherwise (stdout stays NDJSON, or quiet)."""
        print(text, file=self._out if self.output is Output.LINES else self._err, flush=True)

    def attempt(self, seen: AttemptSeen) -> None:
        if self.output is Output.LINES:
            print(attempt_line(seen), file=self._out, flush=True)
        elif self.output is Output.JSON:
            print(attempt_json(seen), file=self._out, flush=True)

    def tick(self, counts: Counts, now_s: float) -> None:
        """On a terminal, a rate line every `RATE_EVERY_S`."""
        if not self._terminal or self.output is Output.JSON:
            return
        if self._last_rate_s is None:
            self._last_rate_s = now_s
            return
        span_s = now_s - self._last_rate_s
        if span_s < RATE_EVERY_S:
            return
        rate = (counts.delivered - self._delivered_at_last) / span_s
        print(f"… {counts.delivered} forwarded, {rate:.1f}/s", file=self._out, flush=True)
        self._last_rate_s, self._delivered_at_last = now_s, counts.delivered
