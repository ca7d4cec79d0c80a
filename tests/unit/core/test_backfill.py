"""The pure rules of `gateway backfill`: window, API verdicts, the wait schedule,
counting, and GitHub's exact body."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from gateway.core.backfill.decisions import (
    ApiRetryPolicy,
    Outcome,
    Tally,
    Verdict,
    Window,
    exact_github_body,
    github_bodies,
    keep_completed_s,
    make_window,
    next_wait_s,
    passed_window,
    verdict,
)
from gateway.core.signatures.base import SchemeParams
from gateway.errors import BackfillUsageError
from tests.support import vectors

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
POLICY = ApiRetryPolicy(base_s=1.0, cap_s=8.0, deadline_s=60.0, max_retry_after_s=30.0)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, Verdict.OK),
        (None, Verdict.RETRY),  # no answer at all
        (429, Verdict.RETRY),
        (408, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (401, Verdict.AUTH),
        (403, Verdict.AUTH),
        (400, Verdict.FAIL),
        (404, Verdict.FAIL),
    ],
)
def test_verdict(status: int | None, expected: Verdict) -> None:
    """Only what may pass on its own is retried; credentials stop at once."""
    assert verdict(status) is expected


@pytest.mark.parametrize(
    ("attempt", "retry_after", "elapsed", "draw", "expected"),
    [
        (1, None, 0.0, 0.5, 0.5),  # full jitter in [0, 1]
        (3, None, 0.0, 0.5, 2.0),  # [0, 4]
        (9, None, 0.0, 1.0 - 1e-9, 8.0 - 8e-9),  # capped at 8
        (1, 7.0, 0.0, 0.5, 7.0),  # Retry-After is waited as asked
        (1, 31.0, 0.0, 0.5, None),  # longer than we will wait: give up now
        (2, 5.0, 56.0, 0.5, None),  # would end past the deadline
        (2, None, 59.0, 0.5, 1.0),  # fits the deadline exactly
        (1, 0.0, 0.0, 0.5, POLICY.base_s),  # "Retry-After: 0" never becomes a busy loop
    ],
)
def test_next_wait(
    attempt: int, retry_after: float | None, elapsed: float, draw: float, expected: float | None
) -> None:
    """Backoff, Retry-After and the deadline, with time and randomness as arguments."""
    got = next_wait_s(POLICY, attempt, retry_after, elapsed, lambda: draw)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_window_defaults_and_refusals() -> None:
    """`until` defaults to now and never passes it; an empty window is refused."""
    w = make_window(NOW - timedelta(hours=1), None, ["b", "a", "a", " "], NOW)
    assert (w.until, w.types, w.types_key) == (NOW, ("a", "b"), "a,b")
    assert make_window(NOW - timedelta(hours=1), NOW + timedelta(days=1), [], NOW).until == NOW
    with pytest.raises(BackfillUsageError):
        make_window(NOW, None, [], NOW)
    assert w.holds(NOW - timedelta(minutes=1)) and not w.holds(NOW)
    assert w.wants("a") and not w.wants("c") and not w.wants(None)


def test_a_newest_first_listing_stops_past_since() -> None:
    w = Window(NOW - timedelta(hours=1), NOW)
    assert not passed_window([NOW - timedelta(minutes=5)], w)
    assert passed_window([NOW - timedelta(minutes=5), NOW - timedelta(hours=2)], w)
    assert not passed_window([], w)


def test_tally_counts_every_fetched_event_once() -> None:
    t = Tally()
    for outcome in (Outcome.PRESENT, Outcome.RECOVERED, Outcome.RECOVERED, Outcome.FAILED):
        t.add(outcome)
    other = Tally()
    other.add(Outcome.PRESENT, 3)
    t.merge(other)
    assert t.to_json() == {
        "fetched": 7,
        "present": 4,
        "recovered": 2,
        "would_recover": 0,
        "failed": 1,
        "inexact": 0,
    }


@pytest.mark.parametrize(
    "sent",
    [
        lambda p: orjson.dumps(p),  # GitHub's own: compact, UTF-8
        lambda p: github_bodies(p)[1],  # non-ASCII escaped
        lambda p: github_bodies(p)[2],  # pretty
    ],
)
def test_the_signed_bytes_are_found(sent: object) -> None:
    """Whichever serialisation the webhook carried, its recorded signature picks it."""
    payload = {"action": "opened", "issue": {"title": "Zahlung fällig ✓ 😀", "n": 1.5}}
    body = sent(payload)  # type: ignore[operator]
    signature = f"sha256={vectors.github_sha256('s3cret', body)}"
    params = SchemeParams(secrets=("other", "s3cret"))
    assert exact_github_body(github_bodies(payload), signature, params) == body


def test_no_proof_means_no_exact_body() -> None:
    """Without a signature, or with one no candidate matches, nothing is claimed exact."""
    params = SchemeParams(secrets=("s3cret",))
    bodies = github_bodies({"a": 1})
    assert exact_github_body(bodies, None, params) is None
    wrong = f"sha256={vectors.github_sha256('s3cret', b'{}')}"
    assert exact_github_body(bodies, wrong, params) is None


@pytest.mark.parametrize(
    ("interval_s", "keep_s"),
    [
        (60.0, 7 * 86_400.0),  # a week, for any usual interval
        (7 * 86_400.0, 14 * 86_400.0),  # never less than the two intervals pass_due reads
    ],
)
def test_completed_progress_is_kept_a_week_or_two_intervals(
    interval_s: float, keep_s: float
) -> None:
    assert keep_completed_s(interval_s) == keep_s
