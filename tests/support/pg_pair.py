"""Throwaway PostgreSQL clusters to crash: one on its own (`PgCluster`), or a primary with
one streaming standby (`PgPair`), on free loopback ports in a directory of their own.

The shared server on 5432 is never stopped; a test that kills or promotes a database
uses these. initdb refuses root, so when the tests run as root every binary runs as
`postgres` (`runuser -u postgres --`). `initdb --auth=trust` already trusts replication
connections from 127.0.0.1, which `pg_basebackup` and the standby use.

    pair = PgPair(synchronous=True)          # or synchronous=False: asynchronous streaming
    pair.start_primary()                     # initdb + start (blocking: use asyncio.to_thread)
    dsn = await pair.create_database()       # "chaos" on the primary; migrate it here
    pair.start_standby()                     # pg_basebackup -R -X stream, then start
                                             # (set pair.replication_port first to stream
                                             #  through something else, e.g. a proxy)
    await pair.wait_streaming()              # pg_stat_replication: streaming (and `sync`)
    pair.primary_dsn, pair.standby_dsn       # direct DSNs of the database, one per server
    pair.multi_host_url(primary_port=proxy)  # "postgresql://postgres@127.0.0.1:P,127.0.0.1:S/
                                             #  chaos?target_session_attrs=read-write"
    pair.kill_primary()                      # SIGKILL the postmaster and every child
    await pair.promote()                     # pg_ctl promote -w; until pg_is_in_recovery() = f
    pair.stop_standby(); pair.cleanup()      # cleanup stops both and removes the directory

`pair.start()` is `start_primary()` then `start_standby()` (a database created after it
reaches the standby by replication). The names `primary` and `standby` stay with the
servers: after `promote()` the writable one is `pair.standby`.

Synchronous mode: the primary runs with `synchronous_commit = on` (its command line) and,
once the standby's base backup is taken, `ALTER SYSTEM SET synchronous_standby_names`
and a reload. Never before: until a standby exists every commit would wait for it (so
the database is created and migrated first), and `pg_basebackup` copies the data
directory's configuration: a promoted standby that inherited the setting would wait for
a standby of its own that does not exist, holding every commit. The standby connects with
`application_name = standby1` (written by `-R` into its `postgresql.auto.conf`) and a
physical replication slot, so the primary keeps the WAL it has not received yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg

from tests.support.services import free_port


def pg_binary(name: str) -> str:
    """A PostgreSQL server binary: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"{name} not found (install PostgreSQL server binaries)")
    return str(candidates[-1])


def run_as_postgres(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL binary, as `postgres` when we are root."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    command = [*prefix, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=check)


def _owned_tempdir(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    return root


def _children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc (a postmaster's backends and workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # Field 4 is the parent; the command name (field 2) may hold spaces: split after ")".
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _segment_key(shmid: str) -> int | None:
    """The key of the System V shared memory segment `shmid`, None when there is none
    (/proc/sysvipc/shm: key, then shmid, then the rest)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 1 and fields[1] == shmid:
                return int(fields[0])
    return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


class PgCluster:
    """One PostgreSQL cluster: a data directory under `root`, on its own port."""

    def __init__(self, root: Path | None = None, name: str = "data") -> None:
        self.port = free_port()
        self.root = root or _owned_tempdir("chaos-pg-")
        self.data = self.root / name
        self.log = self.root / f"{name}.log"
        self.settings: dict[str, str] = {}  # extra `-c name=value` on the command line
        self.killed = False  # its postmaster.pid names a dead process (maybe a reused pid)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_as_postgres(*args, check=check)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> None:
        self._run(
            pg_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--no-sync", "-E", "UTF8", "--locale=C",
        )  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
        options += "-c max_connections=200"
        options += "".join(f" -c {k}={v}" for k, v in self.settings.items())
        self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", options, "start")  # fmt: skip

    def crash(self) -> None:
        """Stop at once, as a crash would: no checkpoint, clients cut mid-transaction."""
        self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")

    def kill(self) -> None:
        """SIGKILL the postmaster and every child at once, as losing the machine would: no
        shutdown checkpoint, nothing flushed, no goodbye to clients or standbys.

        The postmaster's System V shared memory segment, which it would have removed on
        any orderly exit, is removed afterwards: otherwise every kill leaves one behind
        in the machine's table (`ipcs -m`) for good.
        """
        pid_file = self.data / "postmaster.pid"
        lines = pid_file.read_text().splitlines()
        postmaster = int(lines[0])
        # Stopped, the postmaster can neither fork a new child nor react to one dying.
        os.kill(postmaster, signal.SIGSTOP)
        victims = _children(postmaster)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.kill(postmaster, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in (postmaster, *victims)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres processes outlived SIGKILL: {victims}")
            time.sleep(0.02)
        self.killed = True
        self._remove_shared_memory(lines)

    def _remove_shared_memory(self, pid_lines: list[str]) -> None:
        """Remove the segment named by postmaster.pid (line 7: its key and id), now that
        no process of the cluster is attached: only when a segment with that id still has
        that key, so no other server's segment is ever touched."""
        fields = pid_lines[6].split() if len(pid_lines) > 6 else []
        if len(fields) != 2 or not all(f.isdigit() for f in fields) or fields == ["0", "0"]:
            return  # no System V segment recorded (another shared_memory_type)
        key, shmid = int(fields[0]), fields[1]
        if _segment_key(shmid) == key:
            self._run("ipcrm", "-m", shmid)

    def stop(self) -> None:
        if self.killed:  # pg_ctl would signal whatever process now has the old pid
            return
        self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-m", "fast", "stop", check=False)

    async def create_database(self, name: str) -> str:
        conn = await asyncpg.connect(self.dsn())
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.dsn(name)

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn(), timeout=5)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class PgPair:
    """A primary and one standby streaming from it, synchronous or asynchronous."""

    def __init__(
        self,
        *,
        synchronous: bool = True,
        database: str = "chaos",
        standby_name: str = "standby1",
    ) -> None:
        self.synchronous = synchronous
        self.database = database
        self.standby_name = standby_name
        self.root = _owned_tempdir("chaos-pgpair-")
        self.primary = PgCluster(self.root, "primary")
        self.standby = PgCluster(self.root, "standby")
        self.primary.settings = {
            "wal_level": "replica",
            "max_wal_senders": "5",
            "max_replication_slots": "5",
            "hot_standby": "on",
        }
        if synchronous:
            self.primary.settings["synchronous_commit"] = "on"
        self.standby.settings = {"hot_standby": "on", "cluster_name": standby_name}
        #: The port the standby dials for the primary (its base backup too): another one
        #: puts something (a fault proxy) on the replication link.
        self.replication_port = self.primary.port

    # --- addresses ------------------------------------------------------------------
    @property
    def primary_dsn(self) -> str:
        return self.primary.dsn(self.database)

    @property
    def standby_dsn(self) -> str:
        return self.standby.dsn(self.database)

    def multi_host_url(self, *, primary_port: int | None = None) -> str:
        """Both servers in one URL, the writable one chosen by the client. `primary_port`
        puts something else (a fault proxy) in the primary's place."""
        first = primary_port or self.primary.port
        return (
            f"postgresql://postgres@127.0.0.1:{first},127.0.0.1:{self.standby.port}"
            f"/{self.database}?target_session_attrs=read-write"
        )

    # --- life cycle -----------------------------------------------------------------
    def start(self) -> None:
        self.start_primary()
        self.start_standby()

    def start_primary(self) -> None:
        self.primary.init()
        self.primary.start()

    async def create_database(self) -> str:
        """The pair's database on the primary; its DSN there."""
        return await self.primary.create_database(self.database)

    def start_standby(self) -> None:
        """A base backup of the primary, streamed, configured (-R) to follow it, started."""
        conninfo = (
            f"host=127.0.0.1 port={self.replication_port} user=postgres "
            f"application_name={self.standby_name}"
        )
        self.primary._run(
            pg_binary("pg_basebackup"), "-D", str(self.standby.data), "-d", conninfo,
            "-R", "-X", "stream", "-C", "-S", self.standby_name, "--no-sync", "-c", "fast",
        )  # fmt: skip
        self.standby.start()
        if self.synchronous:
            names = f"ALTER SYSTEM SET synchronous_standby_names = '{self.standby_name}'"
            self._psql(self.primary, names)
            self._psql(self.primary, "SELECT pg_reload_conf()")

    @staticmethod
    def _psql(cluster: PgCluster, statement: str) -> None:
        cluster._run(
            pg_binary("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
            "-p", str(cluster.port), "-U", "postgres", "-d", "postgres", "-c", statement,
        )  # fmt: skip

    async def wait_streaming(self, timeout_s: float = 30.0) -> None:
        """Until the primary reports the standby streaming (and `sync` in synchronous mode)."""
        deadline = time.monotonic() + timeout_s
        while True:
            rows = await self.primary.fetch(
                "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1",
                self.standby_name,
            )
            want = "sync" if self.synchronous else "async"
            if any(r["state"] == "streaming" and r["sync_state"] == want for r in rows):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"standby not streaming ({want}): {[dict(r) for r in rows]}")
            await asyncio.sleep(0.1)

    async def wait_replayed(self, timeout_s: float = 30.0) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        (row,) = await self.primary.fetch("SELECT pg_current_wal_lsn() AS lsn")
        deadline = time.monotonic() + timeout_s
        while True:
            (got,) = await self.standby.fetch(
                "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done", row["lsn"]
            )
            if got["done"]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("standby did not replay the primary's WAL in time")
            await asyncio.sleep(0.1)

    def kill_primary(self) -> None:
        """The primary's machine is gone: every one of its processes SIGKILLed."""
        self.primary.kill()

    async def promote(self, timeout_s: float = 60.0) -> None:
        """`pg_ctl promote -w` on the standby, then until it takes writes."""
        await asyncio.to_thread(
            self.standby._run, pg_binary("pg_ctl"), "-D", str(self.standby.data), "-w",
            "-t", str(int(timeout_s)), "promote",
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while (await self.standby.fetch("SELECT pg_is_in_recovery() AS r"))[0]["r"]:
            if time.monotonic() > deadline:
                raise TimeoutError("the promoted standby is still in recovery")
            await asyncio.sleep(0.1)

    def stop_standby(self) -> None:
        self.standby.stop()

    def cleanup(self) -> None:
        """Stop whatever still runs (a killed primary is left as it is) and remove it all."""
        for cluster in (self.standby, self.primary):
            if (cluster.data / "postmaster.pid").exists():
                cluster.stop()  # not a killed one: see PgCluster.stop
        shutil.rmtree(self.root, ignore_errors=True)
