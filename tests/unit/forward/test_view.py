"""What a person running `gateway forward` reads: the attempt lines, NDJSON, the rate
line on a terminal, and the summary."""

from __future__ import annotations

import io
from datetime import datetime

import orjson

from gateway.core.forward.retry import Verdict
from gateway.forward.view import AttemptSeen, Counts, View, attempt_line, summary_line
from gateway.settings.forward import Output

AT = datetime(2026, 12, 4, 12, 3, 41)


def seen(**changes: object) -> AttemptSeen:
    base: dict[str, object] = {
        "at": AT,
        "provider": "stripe",
        "event_type": "payment_intent.succeeded",
        "event_id": "evt_123",
        "attempt": 1,
        "status": 200,
        "elapsed_s": 0.034,
        "verdict": Verdict.DELIVERED,
    }
    return AttemptSeen(**{**base, **changes})  # type: ignore[arg-type]


def test_a_delivery_is_one_line() -> None:
    assert attempt_line(seen()) == (
        "12:03:41  stripe  payment_intent.succeeded  evt_123  → 200  34 ms  (attempt 1)"
    )


def test_a_failure_says_what_comes_next_and_how_the_answer_began() -> None:
    line = attempt_line(
        seen(status=500, verdict=Verdict.RETRY, delay_s=4.8, excerpt=b'{"error":\n "boom"}' * 30)
    )
    assert line.startswith(
        "12:03:41  stripe  payment_intent.succeeded  evt_123  → 500  34 ms  (attempt 1)"
        '  retry in 4.8 s  {"error": "boom"}'
    )
    assert len(line) < 330  # the answer is cut at 200 characters
    parked = attempt_line(
        seen(status=None, error="timeout", verdict=Verdict.PARK, dead_letter_id=7)
    )
    assert "→ timeout" in parked and "parked as dead letter 7" in parked


def test_a_control_character_in_an_id_is_not_written_to_the_terminal() -> None:
    assert "\x1b" not in attempt_line(seen(event_id="evt_\x1b[2J"))


def test_json_lines_name_outcomes_as_the_metric_does() -> None:
    out = io.StringIO()
    View(Output.JSON, out, io.StringIO(), terminal=False).attempt(
        seen(status=503, verdict=Verdict.PARK, dead_letter_id=9, excerpt=b"busy")
    )
    doc = orjson.loads(out.getvalue())
    assert (doc["outcome"], doc["status"], doc["dead_letter_id"], doc["answer"]) == (
        "parked",
        503,
        9,
        "busy",
    )


def test_a_terminal_gets_a_rate_line_every_ten_seconds() -> None:
    out = io.StringIO()
    view = View(Output.QUIET, out, io.StringIO(), terminal=True)
    counts = Counts()
    view.tick(counts, 100.0)
    counts.delivered = 50
    view.tick(counts, 105.0)
    assert out.getvalue() == ""
    view.tick(counts, 110.0)
    assert out.getvalue() == "… 50 forwarded, 5.0/s\n"
    piped = io.StringIO()
    quiet = View(Output.LINES, piped, io.StringIO(), terminal=False)
    quiet.tick(counts, 100.0)
    quiet.tick(counts, 200.0)
    assert piped.getvalue() == ""  # not on a pipe


def test_the_summary_names_a_pause() -> None:
    counts = Counts(delivered=3, retried=1, parked=1, filtered=2, paused=True)
    assert summary_line(counts, 75.0) == (
        "forwarded 3, retried 1, parked 1, blocked 0, filtered 2 in 1.2 min; "
        "destination paused (410 Gone)"
    )
