"""Podman for the deployment tests: a private image store per test session, runc, and the
default limits this machine needs, with no registry (every base is built here).

The store lives under `.data/containers/store-PID` and is reset when the session ends, so
every run builds from a clean store. Debian's base comes from `debootstrap` (cached as a
tarball once per machine, in the user's cache directory, so that a fresh clone does not
fetch it again: the mirror is the slow part) and is imported with `podman import`.

The tools come from `make test`'s set-up (scripts/setup.sh). Where one is missing the
tests skip, naming it, unless `GATEWAY_REQUIRE_CONTAINERS=1` (set by `make test`), where
they fail: the suite that CI runs never passes by skipping them.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".data" / "containers"
#: Outside the checkout: what every clone on this machine would make alike.
MACHINE_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "payments-webhook-gateway-tests"
)
TOOLS_BIN = ROOT / ".data" / "tools" / "bin"
IMAGES = ROOT / "tests" / "integration" / "deploy" / "images"
MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
#: Where a build's RUN sees the host's CA bundle: a build secret, mounted for that RUN only.
BUILD_CA = "/run/secrets/pip-ca"

# runc: crun refuses this machine's mixed cgroups; the limits: podman's defaults are the
# host's hard limits, which here are too low for PostgreSQL and the gateway's connections.
# The store's own temporary and network directories: podman's defaults (/run/libpod,
# /etc/containers/networks) are shared by every store on the machine, so a test run
# would otherwise see, and its clean-up remove, another's containers and networks.
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "{home}/tmp"
[network]
network_config_dir = "{home}/networks"
"""

REQUIRED_ENV = "GATEWAY_REQUIRE_CONTAINERS"


def tool(name: str) -> str:
    """The path of `name` (the set-up's own tool directory first), or a skip/failure."""
    for candidate in (TOOLS_BIN / name, ROOT / ".venv" / "bin" / name):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    reason = f"{name} is not installed (scripts/setup.sh installs it for make test)"
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def as_root() -> None:
    """podman with a store of its own, runc and debootstrap need root here."""
    if os.geteuid() != 0:
        reason = "the container tests run podman and debootstrap as root"
        if os.environ.get(REQUIRED_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@dataclass
class Podman:
    """`podman` on a private store; `run` raises with the command's output on failure."""

    home: Path
    binary: str
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.home / "containers.conf")}

    def argv(self, *args: str) -> list[str]:
        return [
            self.binary,
            "--root",
            str(self.home / "root"),
            "--runroot",
            str(self.home / "run"),
            *args,
        ]

    def run(
        self, *args: str, timeout_s: float = 300, check: bool = True, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.argv(*args),
            input=stdin.decode() if stdin is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=self.env,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)} exited {result.returncode}\n"
                f"stdout: {result.stdout[-4000:]}\nstderr: {result.stderr[-4000:]}"
            )
        return result

    def run_bytes(self, *args: str, timeout_s: float = 300) -> bytes:
        """`run` for a command whose output is binary (`export`, `save`)."""
        result = subprocess.run(
            self.argv(*args), capture_output=True, timeout=timeout_s, env=self.env, check=False
        )
        if result.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {result.stderr[-4000:]!r}")
        return result.stdout

    async def arun(
        self, *args: str, timeout_s: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`run` off the event loop, for tests whose in-process servers must keep answering."""
        return await asyncio.to_thread(self.run, *args, timeout_s=timeout_s, check=check)

    def build(
        self, tag: str, containerfile: Path, context: Path, build_args: Sequence[str] = ()
    ) -> str:
        """Build `containerfile` as `tag`, pip reaching PyPI through the host's CA bundle."""
        args = [f"--build-arg={a}" for a in build_args]
        started = time.monotonic()
        self.run(
            "build",
            "--network=host",
            f"--secret=id=pip-ca,src={HOST_CA}",
            *args,
            "--tag",
            tag,
            "--file",
            str(containerfile),
            str(context),
            timeout_s=900,
        )
        self.timings_s[tag] = time.monotonic() - started
        return tag

    def size_bytes(self, image: str) -> int:
        return int(self.run("image", "inspect", "--format", "{{.Size}}", image).stdout)

    def reset(self) -> None:
        """Remove what this store holds, then the store. Never `podman system reset`: it
        clears directories that other stores on the machine share."""
        for args in (
            ("rm", "--all", "--force", "--time", "0"),
            ("pod", "rm", "--all", "--force"),
            ("volume", "prune", "--force"),
            ("network", "prune", "--force"),
            ("rmi", "--all", "--force"),
        ):
            self.run(*args, check=False, timeout_s=120)
        shutil.rmtree(self.home, ignore_errors=True)


def private_podman() -> Podman:
    """A podman on a new, empty store under `.data/containers/`, after removing the stores
    of runs that ended without their clean-up (interrupted, killed)."""
    as_root()
    binary = tool("podman")
    for stale in DATA.glob("store-*"):
        pid = stale.name.removeprefix("store-")
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            Podman(home=stale, binary=binary).reset()
    home = DATA / f"store-{os.getpid()}"
    if home.exists():
        Podman(home=home, binary=binary).reset()
    home.mkdir(parents=True, exist_ok=True)
    (home / "containers.conf").write_text(CONTAINERS_CONF.format(home=home), encoding="utf-8")
    tool("runc")
    return Podman(home=home, binary=binary)


def debian_rootfs() -> Path:
    """A minimal Debian tarball from the mirror (debootstrap), made once per machine."""
    tarball = MACHINE_CACHE / f"debian-{SUITE}-minbase.tar"
    MACHINE_CACHE.mkdir(parents=True, exist_ok=True)
    # One maker at a time (test processes in parallel): the others wait, then take it.
    with (MACHINE_CACHE / "rootfs.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tarball.exists():
            _debootstrap(tarball)
    return tarball


def _debootstrap(tarball: Path) -> None:
    debootstrap = tool("debootstrap")
    staging = MACHINE_CACHE / f"rootfs-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        subprocess.run(
            [debootstrap, "--variant=minbase", SUITE, str(staging), MIRROR],
            check=True,
            capture_output=True,
            timeout=900,
        )
        # What apt downloaded stays out of every image built on it.
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (staging / cache).glob("*"):
                if item.is_file():
                    item.unlink()
        partial = tarball.with_suffix(f".partial-{os.getpid()}")
        try:
            subprocess.run(["tar", "-C", str(staging), "-cf", str(partial), "."], check=True)
            partial.rename(tarball)
        finally:
            partial.unlink(missing_ok=True)  # a failed tar leaves no half tarball behind
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def import_base(podman: Podman, tag: str) -> str:
    tarball = debian_rootfs()
    started = time.monotonic()
    podman.run("import", str(tarball), tag, timeout_s=300)
    podman.timings_s[tag] = time.monotonic() - started
    return tag
