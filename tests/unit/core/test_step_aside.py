"""Stepping aside from a silent database: when to probe, and what a probe's answer does."""

from __future__ import annotations

import pytest

from gateway.core.health.step_aside import Footing, Move, StepAsidePolicy, after_probe, probe_due

POLICY = StepAsidePolicy(suspect_after_s=1.0, probe_timeout_s=1.5, probe_every_s=1.0)


@pytest.mark.parametrize(
    ("footing", "oldest_wait_s", "since_probe_s", "suspected", "due"),
    [
        # Serving with nothing in hand, or only fresh work: no question to ask.
        (Footing.SERVING, None, 60.0, False, False),
        (Footing.SERVING, 0.5, 60.0, False, False),
        # A batch under way for the suspect time is a reason to ask.
        (Footing.SERVING, 1.0, 60.0, False, True),
        (Footing.SERVING, 9.0, 60.0, False, True),
        # So is a statement that failed for want of the database, whatever the batches.
        (Footing.SERVING, None, 60.0, True, True),
        # But never twice within `probe_every_s`, slow or suspected.
        (Footing.SERVING, 9.0, 0.5, True, False),
        # Aside, it asks every `probe_every_s`, with or without work (it has none).
        (Footing.ASIDE, None, 1.0, False, True),
        (Footing.ASIDE, None, 0.9, False, False),
    ],
)
def test_when_to_probe(
    footing: Footing, oldest_wait_s: float | None, since_probe_s: float, suspected: bool, due: bool
) -> None:
    assert probe_due(footing, oldest_wait_s, since_probe_s, suspected, POLICY) is due


@pytest.mark.parametrize(
    ("footing", "answered", "move"),
    [
        (Footing.SERVING, True, Move.STAY),  # slow, not gone: keep settling
        (Footing.SERVING, False, Move.STEP_ASIDE),  # silent: hand back, stop fetching
        (Footing.ASIDE, False, Move.STAY),  # still silent: stay aside
        (Footing.ASIDE, True, Move.RESUME),  # answers again: fetch again
    ],
)
def test_what_a_probe_answer_does(footing: Footing, answered: bool, move: Move) -> None:
    assert after_probe(footing, answered) is move


@pytest.mark.parametrize("name", ["suspect_after_s", "probe_timeout_s", "probe_every_s"])
def test_thresholds_must_be_positive(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        StepAsidePolicy(**{name: 0.0})
