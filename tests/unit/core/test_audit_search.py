"""The audit page's search: exact or prefix filters (LIKE's own characters taken
literally), a window of at most 31 days (a week by default), and its refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.console.audit_search import (
    AUDIT_WINDOW_DEFAULT,
    AuditUsageError,
    like_prefix,
    parse_audit_search,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ("dlq.resolve", None),
        ("dlq.*", "dlq.%"),
        ("key:stripe/pi_*", "key:stripe/pi\\_%"),
        ("100%*", "100\\%%"),
        ("a\\b*", "a\\\\b%"),
        ("*", "%"),
    ],
)
def test_like_prefix(value: str, pattern: str | None) -> None:
    assert like_prefix(value) == pattern


def test_defaults_and_query() -> None:
    s = parse_audit_search({"actor": [" console:alice "], "outcome": [""]}, NOW)
    assert (s.since, s.until) == (NOW - AUDIT_WINDOW_DEFAULT, NOW)
    assert s.actor == "console:alice" and s.outcome is None
    assert s.query() == [
        ("actor", "console:alice"),
        ("since", "2026-11-24T12:00:00Z"),
        ("until", "2026-12-01T12:00:00Z"),
    ]
    again = parse_audit_search({k: [v] for k, v in s.query()}, NOW + timedelta(days=3))
    assert (again.since, again.until, again.actor) == (s.since, s.until, s.actor)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": ["32d"]}, "search at most 31 days"),
        ({"since": ["1h"], "until": ["2h"]}, "since must be earlier than until"),
        ({"until": ["tomorrow"]}, "until: cannot read 'tomorrow'"),
        ({"outcome": ["denied"]}, "outcome: 'denied' is not one of ok, refused, failed"),
        ({"actor": ["a", "b"]}, "actor: give it once"),
        ({"target": ["x" * 201]}, "target: at most 200 characters"),
        ({"limit": ["500"]}, "limit: give a whole number from 1 to 200"),
        ({"cursor": ["!!"]}, "cursor: not a page cursor"),
    ],
)
def test_refusals(params: dict[str, list[str]], message: str) -> None:
    with pytest.raises(AuditUsageError) as caught:
        parse_audit_search(params, NOW)
    assert message in str(caught.value)
