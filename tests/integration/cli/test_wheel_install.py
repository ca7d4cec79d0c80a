"""The built wheel, installed outside the repository, creates every table.

The package is built from a copy of only what a release needs (no `.git`, no `.venv`),
installed into a fresh virtualenv in a temporary directory, and its `gateway` script runs
`gateway migrate` from there: the migrations must come from inside the wheel, since no
`sql/` directory is anywhere near.

The fresh venv sees the test venv's third-party packages through a `.pth` line naming its
site-packages (so nothing is downloaded); the `.pth` files *inside* that directory are not
processed for a path added this way, so the development checkout's editable `gateway` is
invisible to it.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import asyncpg
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
#: What a release is built from; everything else in the checkout is left out.
RELEASE_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")
RELEASE_DIRS = ("gateway", "sql")


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{cmd}: {result.stdout}\n{result.stderr}"
    return result.stdout


def _copy_release_tree(target: Path) -> Path:
    target.mkdir()
    for name in RELEASE_FILES:
        shutil.copy2(REPO / name, target / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in RELEASE_DIRS:
        shutil.copytree(REPO / name, target / name, ignore=junk)
    return target


def _fresh_venv(path: Path) -> Path:
    """A venv without pip that imports the test venv's dependencies but not its gateway."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    (site_dir,) = path.glob("lib/python3*/site-packages")
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_dir / "_test_dependencies.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    return path / "bin" / "python"


def _tables_in_sql() -> set[str]:
    pattern = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", re.IGNORECASE)
    return {m for p in (REPO / "sql").glob("*.sql") for m in pattern.findall(p.read_text())}


async def _tables(dsn: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    finally:
        await conn.close()
    return {r["table_name"] for r in rows}


def test_installed_wheel_migrates_a_fresh_database(
    tmp_path: Path, empty_database_url: str, nats_url: str
) -> None:
    src = _copy_release_tree(tmp_path / "src")
    dist = tmp_path / "dist"
    # With build isolation: the build back end comes from the configured index (the
    # test venv has no `wheel` for setuptools < 70 to build with).
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src, cwd=tmp_path)
    (wheel,) = dist.glob("*.whl")

    python = _fresh_venv(tmp_path / "venv")
    pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", python]
    _run(*pip, "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp_path)

    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "PYTHON"))}
    config = run_dir / "gateway.toml"
    config.write_text(
        f'[database]\nurl = "{empty_database_url}"\n[nats]\nurl = "{nats_url}"\n', encoding="utf-8"
    )
    # The package and its migrations come from the venv, not from the checkout.
    where = _run(
        python,
        "-c",
        "import gateway, gateway.adapters.postgres as pg; print(gateway.__file__); "
        "print(pg.default_sql_dir())",
        cwd=run_dir,
        env=env,
    ).split()
    assert all(str(tmp_path / "venv") in w for w in where), where
    # The OpenAPI document served at /openapi.json is package data inside the wheel.
    served = _run(
        python,
        "-c",
        "import sys; from gateway.ingest.app import openapi_document; "
        "sys.stdout.buffer.write(openapi_document())",
        cwd=run_dir,
        env=env,
    )
    assert served == (REPO / "gateway" / "ingest" / "openapi.json").read_text(encoding="utf-8")

    out = _run(
        tmp_path / "venv" / "bin" / "gateway", "migrate", "--config", config, cwd=run_dir, env=env
    )
    expected = sorted(p.name for p in (REPO / "sql").glob("[0-9][0-9][0-9]_*.sql"))
    assert out.strip().splitlines() == [
        f"applied {len(expected)} migration(s): {', '.join(expected)}",
        "stream WEBHOOKS created",
    ]

    tables = asyncio.run(_tables(empty_database_url))
    assert {"processed_webhooks", "dlq_webhooks", "settlements", "schema_migrations"} <= tables
    assert _tables_in_sql() <= tables
