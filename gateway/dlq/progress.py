"""What `gateway dlq replay` shows while it runs: each failed or skipped row as it
happens, under a progress bar drawn only on a terminal."""

from __future__ import annotations

import sys
from typing import TextIO

from gateway.core.dlq.model import RowBrief, RowOutcome
from gateway.dlq.plan import ReplayPlan, RowResult


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, stream: TextIO, total: int, width: int = 30) -> None:
        self._stream = stream
        self._total = total
        self._width = width
        self._done = 0
        try:
            self.enabled = stream.isatty() and total > 0
        except ValueError:  # a closed stream
            self.enabled = False

    def clear(self) -> None:
        """Erase the bar so a report line can be printed in its place."""
        if self.enabled:
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    def advance(self) -> None:
        self._done += 1
        if self.enabled:
            filled = self._width * self._done // self._total
            bar = "#" * filled + "-" * (self._width - filled)
            self._stream.write(f"\rreplaying [{bar}] {self._done}/{self._total}")
            self._stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self._stream.write("\n")
            self._stream.flush()


class ReplayReport:
    """Prints each failed or skipped row as it happens, under a progress bar on a TTY."""

    def __init__(
        self, *, quiet: bool, dry_run: bool, out: TextIO | None = None, err: TextIO | None = None
    ) -> None:
        # None: the streams current when a line is written (so redirections apply).
        self._quiet = quiet
        self._out = out
        self._err = err
        self._dry_run = dry_run
        self._progress: Progress | None = None
        self.would: list[RowBrief] = []

    def planned(self, plan: ReplayPlan) -> None:
        if not self._dry_run:  # every result from now on is a row being run
            self._progress = Progress(self._err or sys.stderr, len(plan.to_replay))

    def row(self, result: RowResult) -> None:
        if result.outcome is RowOutcome.WOULD_REPLAY:
            self.would.append(result.row)
        elif result.outcome is not RowOutcome.REPLAYED and not self._quiet:
            r = result.row
            why = (
                f"{result.error_class}: {result.message}" if result.error_class else result.message
            )
            if self._progress is not None:
                self._progress.clear()
            print(
                f"{result.outcome.value:<8} {r.id} {r.stage} {r.provider}/{r.event_id}: {why}",
                file=self._out or sys.stdout,
                flush=True,
            )
        if self._progress is not None:
            self._progress.advance()

    def finish(self) -> None:
        if self._progress is not None:
            self._progress.finish()
