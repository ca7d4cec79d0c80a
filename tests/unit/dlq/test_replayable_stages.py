"""The planner's list of replayable stages is the replayer's stage table, so the console
(which plans without loading the handlers) plans what `gateway dlq replay` would run."""

from __future__ import annotations

import subprocess
import sys

from gateway.dlq.plan import REPLAYABLE_STAGES
from gateway.dlq.replay import STAGE_HANDLERS


def test_the_planners_stages_are_the_stage_tables_keys() -> None:
    assert sorted(REPLAYABLE_STAGES) == sorted(STAGE_HANDLERS)


def test_the_console_replays_import_neither_the_replayer_nor_settlement() -> None:
    """Checked in a fresh interpreter: what importing the replays area loads."""
    code = (
        "import sys, gateway.console.replays, gateway.console.replays_api; "
        "print(' '.join(m for m in sys.modules if m.startswith(("
        "'gateway.ingest', 'gateway.settlement', 'gateway.dlq.replay', 'gateway.dlq.jobs'))"
        " or (m.startswith('gateway.') and m.endswith('_handler'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == ""
