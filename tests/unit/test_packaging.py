"""What the package promises about itself: the lock files pin every dependency within
pyproject.toml's bounds, the runtime and development locks agree, and the bounds the
gateway's code relies on are in place."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", re.MULTILINE)


def _pins(name: str) -> dict[str, Version]:
    text = (REPO / name).read_text(encoding="utf-8")
    return {canonicalize_name(n): Version(v) for n, v in PIN.findall(text)}


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        ("requirements.lock", PROJECT["dependencies"]),
        (
            "requirements-dev.lock",
            PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"],
        ),
    ],
)
def test_every_dependency_is_pinned_within_its_bounds(lock: str, requirements: list[str]) -> None:
    pins = _pins(lock)
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in {lock}: run `make lock`"
        assert req.specifier.contains(pins[name]), f"{lock} pins {name}=={pins[name]}: {req}"


def test_the_runtime_lock_agrees_with_the_development_lock() -> None:
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    assert {name: dev.get(name) for name in runtime} == runtime


@pytest.mark.parametrize(
    ("name", "too_old", "oldest_allowed"),
    [
        # The adapter uses the 0.17 client API at import.
        ("tigerbeetle", "0.16.78", "0.17.0"),
        # The first release that folds CR/LF in NATS header values.
        ("nats-py", "2.15.0", "2.16.0"),
    ],
)
def test_bounds_the_code_relies_on(name: str, too_old: str, oldest_allowed: str) -> None:
    (req,) = (Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == name)
    assert not req.specifier.contains(too_old)
    assert req.specifier.contains(oldest_allowed)


def test_tigerbeetle_stays_on_the_tested_minor() -> None:
    (req,) = (Requirement(r) for r in PROJECT["dependencies"] if r.startswith("tigerbeetle"))
    assert not req.specifier.contains("0.18.0")
