"""A backfill report stays bounded however many events fail: the lines are capped at
`LISTED_MAX`, the rest counted, and the CLI says how many it left off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.backfill.parts import LISTED_MAX, BackfillReport
from gateway.cli.backfill import _print
from gateway.core.backfill.decisions import Window

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def report() -> BackfillReport:
    return BackfillReport("stripe", Window(NOW - timedelta(hours=1), NOW), dry_run=False)


@pytest.mark.parametrize(
    ("failures", "kept", "left_off"),
    [(0, 0, 0), (1, 1, 0), (LISTED_MAX, LISTED_MAX, 0), (LISTED_MAX + 5, LISTED_MAX, 5)],
)
def test_failure_lines_are_capped_and_the_rest_counted(
    failures: int, kept: int, left_off: int
) -> None:
    """Up to LISTED_MAX lines are kept, in order; beyond, each is counted, not kept."""
    r = report()
    for i in range(failures):
        r.failed(f"evt_{i}: ProviderApiAnswerInvalid: bad")
    doc = r.to_json()
    assert (len(doc["errors"]), doc["errors_left_off"]) == (kept, left_off)
    assert doc["errors"][:1] == ([] if failures == 0 else ["evt_0: ProviderApiAnswerInvalid: bad"])


def test_the_cli_says_how_many_lines_it_left_off(capsys: pytest.CaptureFixture[str]) -> None:
    r = report()
    for i in range(LISTED_MAX + 3):
        r.failed(f"evt_{i}: boom")
    _print(r)
    lines = capsys.readouterr().out.splitlines()
    failed = [line for line in lines if line.startswith("failed ")]
    assert len(failed) == LISTED_MAX + 1
    assert failed[-1] == "failed   ... and 3 more (the counts below are complete)"
