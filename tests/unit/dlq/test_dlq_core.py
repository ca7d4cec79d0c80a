"""The DLQ commands' pure decisions: times, filters, replay flags and plans, alert rules."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gateway.core.alerting import (
    AlertSettings,
    AlertState,
    Observation,
    RetryWindow,
    Rule,
    readings,
    transition,
)
from gateway.core.dlq_filters import (
    DlqFilter,
    ReplayOptions,
    build_filter,
    check_replay_flags,
    format_age,
    pace_delay_s,
    parse_duration_s,
    parse_ids,
    parse_instant,
)
from gateway.core.dlq_model import DlqRow, RowBrief
from gateway.dlq.format import decode_payload, row_doc, safe, show_page, table
from gateway.dlq.plan import RowOutcome, plan
from gateway.dlq.progress import Progress
from gateway.dlq.replay import failure_of
from gateway.errors import DatabaseUnavailable, DlqUsageError, UnknownMerchant

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86_400),
        ("1w", 604_800),
        ("1h30m", 5400),
        (" 2H ", 7200),  # operators type capitals and spaces
        ("0m", 0),
    ],
)
def test_durations_in_seconds(text: str, seconds: int) -> None:
    """Each unit and a sum of units read as the seconds they mean."""
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "h", "2x", "2h-1m", "-2h", "1.5h", "2026-11-30"])
def test_not_a_duration(text: str) -> None:
    """Anything that is not digits+unit pairs is not a duration (it may be a time)."""
    assert parse_duration_s(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T10:00Z", datetime(2026, 11, 30, 10, 0, tzinfo=UTC)),
        ("2026-11-30T10:00z", datetime(2026, 11, 30, 10, 0, tzinfo=UTC)),
        ("2026-11-30T10:00:30+01:00", datetime(2026, 11, 30, 9, 0, 30, tzinfo=UTC)),
        ("2026-11-30", datetime(2026, 11, 30, 0, 0, tzinfo=UTC)),  # a date alone is UTC
        ("30m", NOW - timedelta(minutes=30)),
        ("1d", NOW - timedelta(days=1)),
    ],
)
def test_instants_absolute_or_ago(text: str, expected: datetime) -> None:
    """Absolute times keep their zone (returned in UTC); durations count back from now."""
    assert parse_instant(text, NOW, "--since") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "--since: cannot read 'yesterday'"),
        ("2026-13-45T10:00Z", "--since: cannot read"),
        ("2026-11-30T10:00", "has no time zone"),  # local or UTC? refuse to guess
        ("99999999w", "reaches before year 1"),  # too far back: one line, no traceback
    ],
)
def test_bad_instants_say_which_flag_and_why(text: str, message: str) -> None:
    """A time that cannot be read names the flag and shows the accepted forms."""
    with pytest.raises(DlqUsageError, match=message):
        parse_instant(text, NOW, "--since")


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


def test_ids_positive_integers_in_order_without_repeats() -> None:
    """Ids may be written with a leading #; repeats count once."""
    assert parse_ids(["3", "#1", "3"]) == (3, 1)
    for bad in ("x", "0", "-1", "1.5"):
        with pytest.raises(DlqUsageError, match="is not a row id"):
            parse_ids([bad])


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


@pytest.mark.parametrize(
    ("done", "now_s", "delay_s"),
    [(0, 0.0, 0.0), (1, 0.0, 0.5), (4, 1.0, 1.0), (4, 3.0, 0.0)],
)
def test_pacing_keeps_the_average_rate(done: int, now_s: float, delay_s: float) -> None:
    """At 2 rows/s, row n starts at n/2 s after the start; a late run does not wait."""
    assert pace_delay_s(0.0, done, 2.0, now_s) == delay_s
    assert pace_delay_s(0.0, done, None, now_s) == 0.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "0s"), (42, "42s"), (300, "5m"), (7500, "2h05m"), (273_600, "3d04h")],
)
def test_ages(seconds: int, text: str) -> None:
    """Ages are compact and never negative (clocks differ a little)."""
    assert format_age(seconds) == text


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


def test_terminal_text_is_made_harmless() -> None:
    """Escape sequences a sender put in a payload cannot drive the operator's terminal."""
    assert safe("red \x1b[31m\nok\t") == "red \\x1b[31m\nok\t"
    assert table(("id", "event id"), [(1, "a\x07")]) == "ID  EVENT ID\n1   a\\x07"


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (b'{"a": 1}', "json"),
        (b"a=1&b=2", "text"),
        (b"\xff\xfe\x00", "base64"),
        (b"[" * 300 + b"]" * 300, "text"),  # parses, but orjson prints only 254 levels
        (b"[" * 2000 + b"]" * 2000, "text"),  # deeper than orjson parses
        (b'\xef\xbb\xbf{"a": 1}', "text"),  # a BOM
        (b'{"a": 1e400}', "text"),
        (b'{"a": "\\ud800"}', "text"),  # a lone surrogate escape
    ],
)
def test_payload_decoding(payload: bytes, kind: str) -> None:
    """Payloads are shown as JSON when they can be printed as JSON, else as text, else as
    base64."""
    assert decode_payload(payload)[0] == kind


def test_show_page_prints_a_deeply_nested_payload_as_text() -> None:
    """`dlq show` prints what orjson cannot pretty-print, byte for byte, without a traceback."""
    payload = b"[" * 300 + b"]" * 300
    at = datetime(2026, 1, 1, tzinfo=UTC)
    row = DlqRow(
        1, 1, "ingest", "stripe", "evt_1", None, "PAYLOAD_NOT_JSON", "deep", None,
        payload, {}, 1, at, at, at, False, None, None, None, None,
    )  # fmt: skip
    page = show_page(row, at)
    assert f"payload (text, {len(payload)} bytes)" in page
    assert payload.decode() in page
    assert row_doc(row)["payload"] == payload.decode()  # `show --json` can print it


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
