"""What the server processes cost: resident memory and CPU time, read from /proc."""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (uvicorn's workers run as children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def rss_kib(pid: int) -> int:
    """VmRSS of one process in KiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(pid: int) -> int:
    """Resident memory of `pid` and its descendants, in KiB."""
    return sum(rss_kib(p) for p in descendants(pid))


def machine_busy_s() -> float:
    """Busy (not idle, not iowait) CPU seconds of the whole machine since boot, all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # without guest time, already counted in user
    return (total - idle) / _CLOCK_TICKS


@dataclass
class RssSampler:
    """Samples a process tree's RSS every `interval_s` in a thread, to catch a peak."""

    pid: int
    interval_s: float = 1.0
    samples_kib: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> RssSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples_kib.append(tree_rss_kib(self.pid))


def cpu_s(pid: int) -> float:
    """CPU seconds so far of one process (0 once it is gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return 0.0


def all_cpu_s() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of every process on the machine, with its command name."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat.rpartition(")")[2].split()
            found[int(entry.name)] = (comm, (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS)
    return found


@dataclass
class CpuMeter:
    """CPU used between `start()` and `stop()`, in percent of one core (200 % = both
    cores of a 2-vCPU VM): by the server (with its workers), `gateway relay` processes,
    `gateway settle` processes (when `settle_pids` names any), NATS, the whole PostgreSQL
    cluster, wrk, the machine as a whole, and the busiest other processes.

    On a small VM (2 vCPUs) the load generator, the server, PostgreSQL and NATS all compete
    for the same cores, and so does anything else running (a test suite, a build): the
    `others` list says when a figure was taken on a busy machine. wrk's share comes from
    RUSAGE_CHILDREN, so call `stop()` after wrk has been waited for. Processes that exit
    during the window (short-lived PostgreSQL backends) drop out of the sums. With
    `database`, the backends serving that database are also summed on their own.
    """

    server_pid: int
    nats_pid: int | None = None
    relay_pids: list[int] = field(default_factory=list)
    database: str | None = None
    settle_pids: list[int] = field(default_factory=list)
    _start: dict[int, tuple[str, float]] = field(default_factory=dict)
    _busy0: float = 0.0
    _wrk0: float = 0.0
    _t0: float = 0.0

    @staticmethod
    def _children_s() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def start(self) -> None:
        self._start = all_cpu_s()
        self._busy0 = machine_busy_s()
        self._wrk0 = self._children_s()
        self._t0 = time.monotonic()

    def stop(self) -> dict[str, Any]:
        elapsed_s = max(time.monotonic() - self._t0, 1e-9)
        end = all_cpu_s()
        used = {
            pid: (comm, cpu - self._start[pid][1])
            for pid, (comm, cpu) in end.items()
            if pid in self._start
        }
        server = set(descendants(self.server_pid))

        def pct(seconds: float) -> float:
            return round(100 * max(seconds, 0.0) / elapsed_s, 1)

        relays = {p for pid in self.relay_pids for p in descendants(pid)}
        settlers = {p for pid in self.settle_pids for p in descendants(pid)}
        ours = server | relays | settlers | {self.nats_pid, os.getpid()}
        others = sorted(
            (
                (comm, s)
                for pid, (comm, s) in used.items()
                if pid not in ours and comm != "postgres"
            ),
            key=lambda item: -item[1],
        )
        found: dict[str, Any] = {
            "server_pct": pct(sum(s for pid, (_, s) in used.items() if pid in server)),
            "relay_pct": pct(sum(s for pid, (_, s) in used.items() if pid in relays)),
            "settle_pct": pct(sum(s for pid, (_, s) in used.items() if pid in settlers)),
            "nats_pct": pct(used.get(self.nats_pid or -1, ("", 0.0))[1]),
            "postgres_cluster_pct": pct(sum(s for c, s in used.values() if c == "postgres")),
            "postgres_db_pct": None,
            "wrk_pct": pct(self._children_s() - self._wrk0),
            "machine_busy_pct": pct(machine_busy_s() - self._busy0),
        }
        if self.database is not None:
            found["postgres_db_pct"] = pct(
                sum(s for pid, (c, s) in used.items() if c == "postgres" and self._serves(pid))
            )
        else:
            del found["postgres_db_pct"]
        if not self.settle_pids:
            del found["settle_pct"]
        # What the machine did beyond the four above: other processes, the kernel, and
        # processes that came and went. Large values mean the figures were taken on a
        # machine busy with something else.
        accounted = sum(
            v
            for k, v in found.items()
            if k not in ("machine_busy_pct", "postgres_db_pct") and v is not None
        )
        found["everything_else_pct"] = round(max(found["machine_busy_pct"] - accounted, 0.0), 1)
        found["others"] = [(comm, pct(s)) for comm, s in others[:3] if pct(s) >= 5]
        found["elapsed_s"] = round(elapsed_s, 3)
        return found

    def _serves(self, pid: int) -> bool:
        """Whether a postgres process is a backend of `database` (its title is
        "postgres: user database host state")."""
        with contextlib.suppress(OSError):
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            return f" {self.database} " in title
        return False
