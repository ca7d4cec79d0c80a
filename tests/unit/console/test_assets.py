"""The console's templates and static files, from the source tree: no absolute
http(s):// URL anywhere (no CDN, nothing fetched from elsewhere), no inline script or
style (the CSP forbids them), and pyproject.toml's package data names every one, so the
wheel carries them (the wheel itself is checked in tests/integration/console)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CONSOLE = REPO / "gateway" / "console"
ABSOLUTE_URL = re.compile(rb"https?://", re.IGNORECASE)
#: Files a wheel need not carry: notes for whoever reads the source.
NOT_SHIPPED = {"README.md"}


def assets() -> list[Path]:
    found = [p for d in ("templates", "static") for p in (CONSOLE / d).rglob("*") if p.is_file()]
    return sorted(p for p in found if p.name not in NOT_SHIPPED)


def test_there_are_assets_to_check() -> None:
    names = {p.relative_to(CONSOLE).as_posix() for p in assets()}
    assert {"templates/base.html", "static/htmx.min.js", "static/console.css"} <= names


@pytest.mark.parametrize("path", assets(), ids=lambda p: p.relative_to(CONSOLE).as_posix())
def test_no_absolute_url(path: Path) -> None:
    """Vendored htmx included: 2.0.11's htmx.min.js holds no such string."""
    found = [m.start() for m in ABSOLUTE_URL.finditer(path.read_bytes())]
    assert found == [], f"{path.name}: absolute URL at byte offsets {found[:5]}"


JINJA = re.compile(r"\{#.*?#\}|\{%.*?%\}|\{\{.*?\}\}", re.DOTALL)
TEMPLATES = sorted((CONSOLE / "templates").rglob("*.html"))
INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE), "a <script> without src"),
    (re.compile(r"<style\b", re.IGNORECASE), "a <style> element"),
    (re.compile(r"\sstyle\s*=", re.IGNORECASE), "a style= attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.IGNORECASE), "an on*= handler"),
    (re.compile(r"javascript:", re.IGNORECASE), "a javascript: URL"),
]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.relative_to(CONSOLE).as_posix())
def test_no_inline_script_or_style(path: Path) -> None:
    # Jinja's own tags and comments are not HTML ({% if only == s %} is no handler).
    text = JINJA.sub(" ", path.read_text(encoding="utf-8"))
    broken = [what for pattern, what in INLINE if pattern.search(text)]
    assert broken == [], f"{path.name}: {broken} (the CSP refuses them)"


def test_package_data_names_every_asset() -> None:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = doc["tool"]["setuptools"]["package-data"]["gateway"]
    # setuptools expands the globs as pathlib does (`**/` is zero or more folders).
    matched = {p for g in globs for p in (REPO / "gateway").glob(g)}
    shipped = [*assets(), *(CONSOLE / "openapi").glob("*.json")]
    missing = [p.relative_to(REPO).as_posix() for p in shipped if p not in matched]
    assert missing == []
