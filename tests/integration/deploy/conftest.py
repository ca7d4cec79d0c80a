"""The images the deployment tests run: built once per session on a private, empty store
(tests/support/containers.py), the gateway's from the top-level Containerfile on a local
Debian base standing in for the official Python image."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.cli import package_version
from tests.support.containers import IMAGES, ROOT, Podman, import_base, private_podman

GATEWAY_IMAGE = "localhost/payments-gateway:test"
#: What the session measured, for the summary at the end of the run.
REPORT: dict[str, str] = {}


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    engine = private_podman()
    try:
        yield engine
    finally:
        for tag, seconds in engine.timings_s.items():
            REPORT[f"built {tag}"] = f"{seconds:.1f} s"
        engine.reset()


@pytest.fixture(scope="session")
def debian_base(podman: Podman) -> str:
    return import_base(podman, "localhost/gw-test-debian:bookworm")


@pytest.fixture(scope="session")
def python_image(podman: Podman, debian_base: str) -> str:
    return podman.build(
        "localhost/gw-test-python:bookworm",
        IMAGES / "python.Containerfile",
        IMAGES,
        [f"BASE={debian_base}"],
    )


@pytest.fixture(scope="session")
def gateway_image(podman: Podman, python_image: str) -> str:
    tag = podman.build(
        GATEWAY_IMAGE,
        ROOT / "Containerfile",
        ROOT,
        [f"BASE={python_image}", f"VERSION={package_version()}"],
    )
    size = podman.size_bytes(tag)
    base = podman.size_bytes(python_image)
    REPORT["gateway image"] = (
        f"{size / 1e6:.0f} MB ({(size - base) / 1e6:.0f} MB above its Python base)"
    )
    return tag


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORT:
        terminalreporter.section("containers")
        for name, value in REPORT.items():
            terminalreporter.write_line(f"{name}: {value}")
