"""The DLQ commands' pure decisions: filters, replay flags and plans, alert rules (the
times and ids they read: tests/unit/core/test_operator_input.py; what they print:
tests/unit/cli/test_format.py)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.core.dlq.filters import DlqFilter, ReplayOptions, build_filter, check_replay_flags
from gateway.core.dlq.model import RowBrief, RowOutcome
from gateway.core.health.alerting import (
    AlertSettings,
    AlertState,
    Observation,
    RetryWindow,
    Rule,
    readings,
    transition,
)
from gateway.dlq.plan import plan
from gateway.dlq.progress import Progress
from gateway.dlq.replay import failure_of
from gateway.errors import DatabaseUnavailable, DlqUsageError, UnknownMerchant

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_filter_defaults_to_open_rows_and_normalises_classes() -> None:
    """No flags: unresolved rows; error classes are matched upper-case, repeats dropped."""
    f = build_filter(NOW, error_classes=["unknown_merchant", "UNKNOWN_MERCHANT"])
    assert f.resolved is False
    assert f.error_classes == ("UNKNOWN_MERCHANT",)
    assert not DlqFilter().narrowed and f.narrowed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resolved": True, "unresolved": True}, "exclude each other"),
        ({"resolved": True, "include_all": True}, "exclude each other"),
        ({"stages": ["settlment"]}, "unknown stage 'settlment'"),
        ({"since": "1h", "until": "2h"}, "--since must be earlier than --until"),
        ({"until": "soon"}, "--until: cannot read"),
    ],
)
def test_conflicting_or_bad_filters(kwargs: dict[str, Any], message: str) -> None:
    """Contradictory filters are refused instead of silently matching nothing."""
    with pytest.raises(DlqUsageError, match=message):
        build_filter(NOW, **kwargs)


def _flags(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        ids=(),
        replay_all=True,
        dlq_filter=DlqFilter(),
        limit=None,
        rate_per_s=None,
        max_attempts=5,
        force=False,
        dry_run=False,
    )
    return values | overrides


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ids": ["1"], "replay_all": True}, "--id and --all exclude each other"),
        ({"replay_all": False}, "say which rows"),
        ({"ids": ["1"], "replay_all": False, "limit": 3}, "apply to --all"),
        (
            {"ids": ["1"], "replay_all": False, "dlq_filter": DlqFilter(stages=("ingest",))},
            "apply to --all",
        ),
        ({"rate_per_s": 0}, "--rate must be a positive"),
        ({"rate_per_s": float("nan")}, "--rate must be a positive"),  # nan <= 0 is false
        ({"rate_per_s": float("inf")}, "--rate must be a positive"),
        ({"max_attempts": 0}, "--max-attempts must be a positive"),
        ({"limit": 0}, "--limit must be a positive"),
    ],
)
def test_replay_flags_that_cannot_be_run(overrides: dict[str, Any], message: str) -> None:
    """Replay flags that contradict each other or mean nothing are refused up front."""
    with pytest.raises(DlqUsageError, match=message):
        check_replay_flags(**_flags(**overrides))


def test_replay_flags_become_options() -> None:
    """Valid flags turn into the options the engine runs with."""
    options = check_replay_flags(**_flags(ids=["4", "4"], replay_all=False, rate_per_s=2.0))
    assert options == ReplayOptions(ids=(4,), rate_per_s=2.0)


def _brief(
    row_id: int, stage: str = "settlement", attempts: int = 1, resolved: bool = False
) -> RowBrief:
    return RowBrief(
        row_id, stage, "stripe", f"evt_{row_id}", None, "UNKNOWN_MERCHANT", attempts,
        NOW, NOW, NOW, resolved, "replayed" if resolved else None,
    )  # fmt: skip


def test_plan_sorts_rows_into_run_skip_and_no_handler() -> None:
    """Resolved and capped rows are skipped, unhandled stages fail, the rest run in order."""
    briefs = [
        _brief(1),
        _brief(2, resolved=True),
        _brief(3, stage="publish"),
        _brief(4, attempts=5),
        _brief(5),
    ]
    result = plan(briefs, ("ingest", "settlement"), ReplayOptions())
    assert [b.id for b in result.to_replay] == [1, 5]
    outcomes = {r.row.id: (r.outcome, r.error_class) for r in result.results}
    assert outcomes == {
        2: (RowOutcome.SKIPPED, None),
        3: (RowOutcome.FAILED, "NO_HANDLER"),
        4: (RowOutcome.SKIPPED, None),
    }
    message = result.results[1].message
    assert message is not None and "no handler for stage publish" in message


def test_plan_force_and_limit() -> None:
    """--force includes capped rows; --limit keeps the oldest N of those that would run."""
    briefs = [_brief(1, attempts=9), _brief(2), _brief(3)]
    forced = plan(briefs, ("settlement",), ReplayOptions(force=True, limit=2))
    assert [b.id for b in forced.to_replay] == [1, 2]
    assert forced.results == []


def test_failures_keep_the_class_of_our_errors() -> None:
    """Our errors keep their class (stack only when unexpected or transient)."""
    permanent = failure_of(UnknownMerchant("no account for m_1"))
    assert (permanent.error_class, permanent.message, permanent.detail) == (
        "UNKNOWN_MERCHANT",
        "no account for m_1",
        None,
    )
    transient = failure_of(DatabaseUnavailable("down"))
    assert transient.error_class == "DATABASE_UNAVAILABLE"
    unexpected = failure_of(KeyError("amount"))
    assert unexpected.error_class == "UNEXPECTED_ERROR"
    assert unexpected.message == "KeyError: 'amount'"


def test_progress_bar_only_on_a_terminal() -> None:
    """Output piped to a file or another program gets no progress bar."""
    stream = io.StringIO()
    bar = Progress(stream, total=3)
    bar.advance()
    bar.finish()
    assert not bar.enabled and stream.getvalue() == ""


# --- alerts ---------------------------------------------------------------------------


def test_readings_against_thresholds() -> None:
    """More than the threshold is active; exactly the threshold is not."""
    s = AlertSettings()
    obs = Observation(10, 3600.0, {"webhooks.a.x": 50.0, "webhooks.b.y": 51.0})
    active = {(r.rule, r.key): r.active for r in readings(obs, s)}
    assert active == {
        (Rule.DLQ_BURST, ""): False,
        (Rule.DLQ_STALE, ""): False,
        (Rule.RETRY_STORM, "webhooks.a.x"): False,
        (Rule.RETRY_STORM, "webhooks.b.y"): True,
    }
    burst = readings(Observation(11, None, {}), s)[0]
    assert burst.active and "11 rows parked" in burst.summary


def test_a_skipped_backfill_page_is_one_reading_per_provider() -> None:
    """Any skip in the window is active; a provider whose skips are older reads 0, so
    its episode can end."""
    obs = Observation(0, None, {}, {"paddle": 0, "stripe": 2})
    found = [r for r in readings(obs, AlertSettings()) if r.rule is Rule.BACKFILL_PAGE_SKIPPED]
    assert [(r.key, r.value, r.active) for r in found] == [
        ("paddle", 0, False),
        ("stripe", 2, True),
    ]
    assert found[1].summary.startswith("2 stripe backfill pages skipped in the last 3600 s")


def test_one_notice_per_episode() -> None:
    """FIRING once when it starts, nothing while it holds, OK once when it clears."""
    s = AlertSettings()
    on = readings(Observation(11, None, {}), s)[0]
    off = readings(Observation(0, None, {}), s)[0]
    start = transition(AlertState.OK, None, on, NOW)
    assert start is not None and start.state is AlertState.FIRING
    assert transition(AlertState.FIRING, NOW, on, NOW) is None
    end = transition(AlertState.FIRING, NOW, off, NOW + timedelta(minutes=6))
    assert end is not None and end.state is AlertState.OK
    assert end.payload("gw-1")["started_at"] == NOW.isoformat()
    assert end.payload("gw-1")["status"] == "resolved"
    assert transition(AlertState.OK, None, off, NOW) is None


def test_retry_rate_over_the_last_minute() -> None:
    """The rate is the increase since the newest sample a minute old, per minute."""
    window = RetryWindow()
    window.add(0.0, {})
    assert window.per_minute() == {}  # one sample: no rate yet
    window.add(30.0, {"s": 60.0})
    assert window.per_minute() == {"s": 120.0}
    window.add(60.0, {"s": 60.0})
    assert window.per_minute() == {"s": 60.0}
    window.add(90.0, {"s": 60.0})
    assert window.per_minute() == {"s": 0.0}
    window.add(120.0, {"s": 5.0})  # the counter restarted
    assert window.per_minute() == {"s": 5.0}
