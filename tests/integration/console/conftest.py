"""The console harness's fixtures for every test in this folder, and `cfg`: a config
file naming the harness's database (NATS unreachable: the commands compared with the
console's API read PostgreSQL only)."""

from pathlib import Path

import pytest

from tests.support.console import ConsoleHarness, console, console_factory

__all__ = ["cfg", "console", "console_factory"]


@pytest.fixture
def cfg(tmp_path: Path, console: ConsoleHarness) -> str:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'[database]\nurl = "{console.dsn}"\n\n[nats]\nurl = "nats://127.0.0.1:1"\n',
        encoding="utf-8",
    )
    return str(path)
