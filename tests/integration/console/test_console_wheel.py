"""The built wheel carries the console: every template, static file and OpenAPI
fragment is inside, none of its templates or assets holds an absolute http(s):// URL,
and the installed package serves its pages and htmx from that copy."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
RELEASE_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")
RELEASE_DIRS = ("gateway", "sql")
ABSOLUTE_URL = re.compile(rb"https?://", re.IGNORECASE)
CONSOLE = "gateway/console/"


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{cmd}: {result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of only what a release needs."""
    tmp = tmp_path_factory.mktemp("console-wheel")
    src = tmp / "src"
    src.mkdir()
    for name in RELEASE_FILES:
        shutil.copy2(REPO / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in RELEASE_DIRS:
        shutil.copytree(REPO / name, src / name, ignore=junk)
    dist = tmp / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src, cwd=tmp)
    (wheel,) = dist.glob("*.whl")
    return wheel


def source_files(folder: str, pattern: str = "*") -> set[str]:
    root = REPO / "gateway" / "console" / folder
    return {
        f"{CONSOLE}{p.relative_to(root.parent).as_posix()}"
        for p in root.rglob(pattern)
        if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts
    }


def test_the_wheel_carries_every_template_asset_and_fragment(built: Path) -> None:
    names = set(zipfile.ZipFile(built).namelist())
    wanted = source_files("templates") | source_files("static") | source_files("openapi", "*.json")
    assert f"{CONSOLE}templates/base.html" in wanted
    assert f"{CONSOLE}static/htmx.min.js" in wanted
    assert sorted(wanted - names) == []


def test_no_template_or_asset_in_the_wheel_holds_an_absolute_url(built: Path) -> None:
    """The rule covers the vendored htmx too: its minified file holds no such string."""
    with zipfile.ZipFile(built) as wheel:
        shipped = [
            n
            for n in wheel.namelist()
            if n.startswith((f"{CONSOLE}templates/", f"{CONSOLE}static/"))
        ]
        assert len(shipped) >= 5
        offending = {n: ABSOLUTE_URL.findall(wheel.read(n))[:3] for n in shipped}
    assert {n: found for n, found in offending.items() if found} == {}


def test_the_installed_wheel_serves_pages_and_htmx(built: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    (site_dir,) = env_dir.glob("lib/python3*/site-packages")
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_dir / "_test_dependencies.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    python = env_dir / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "-q", built, cwd=tmp_path)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "import asyncio, gateway, httpx\n"
        "from typing import Any, cast\n"
        "from gateway.console.app import build_app\n"
        "from gateway.console.web import ConsoleDeps\n"
        "from gateway.settings import parse\n"
        "doc = {'database': {'url': 'postgresql://127.0.0.1:1/x'},"
        " 'nats': {'url': 'nats://127.0.0.1:1'}}\n"
        "app = build_app(ConsoleDeps(pool=cast(Any, None), settings=parse(doc, env={})))\n"
        "async def main():\n"
        "    t = httpx.ASGITransport(app=app)\n"
        "    async with httpx.AsyncClient(transport=t, base_url='http://127.0.0.1:8070') as c:\n"
        "        for path in ('/console/login', '/console/static/htmx.min.js',\n"
        "                     '/console/static/console.css'):\n"
        "            r = await c.get(path)\n"
        "            print(path, r.status_code, len(r.content))\n"
        "print(gateway.__file__)\n"
        "asyncio.run(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "PYTHON"))}
    out = _run(python, "-c", probe, cwd=elsewhere, env=env).splitlines()
    assert str(env_dir) in out[0], "the package came from the installed wheel"
    statuses = {line.split()[0]: line.split()[1] for line in out[1:]}
    assert statuses == {
        "/console/login": "200",
        "/console/static/htmx.min.js": "200",
        "/console/static/console.css": "200",
    }
