"""Several processes, one set of figures: prometheus_client's multiprocess mode.

When `PROMETHEUS_MULTIPROC_DIR` names a directory as prometheus_client is first imported,
every value is also written to a per-process file there, and a scrape merges the files
of all processes: counters and histograms add up, gauges combine as each one says
(`registry._GAUGE_MODE`). `gateway serve --workers N` sets it, for its workers only, to a
fresh private directory (`multiprocess_dir`). A process started with the variable
already set follows prometheus_client's own convention and merges whatever else writes
there; nothing else in the gateway sets it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.multiprocess import mark_process_dead

#: The variable prometheus_client reads, at import, to write values to per-process files.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: A live gauge file of one process: `gauge_{mode}_{pid}.db`.
_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w+_(\d+)\.db")


def forget_dead_processes(shared_dir: str) -> None:
    """Drop the live gauges of processes that ended without `close` (a worker that
    crashed or was killed; uvicorn starts another in its place)."""
    for path in Path(shared_dir).glob("gauge_live*_*.db"):
        found = _LIVE_GAUGE_FILE.fullmatch(path.name)
        if found is None:
            continue
        pid = int(found.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            mark_process_dead(pid, shared_dir)  # type: ignore[no-untyped-call]  # unannotated there
        except PermissionError:
            pass  # alive, someone else's: a pid reused since; leave it


@contextlib.contextmanager
def multiprocess_dir() -> Iterator[str]:
    """A fresh private directory (mode 0700) for the per-process metric files of the
    block's child processes, named by `PROMETHEUS_MULTIPROC_DIR` for them; removed with
    its files at exit. Fresh per run, so no earlier run's counts are ever merged in."""
    path = tempfile.mkdtemp(prefix="gateway-metrics-")
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(path, ignore_errors=True)
