"""The documentation site builds under `mkdocs build --strict`: every nav page exists,
no page is left out of the nav, and no link or anchor is broken (mkdocs.yml's
`validation` makes each of those a warning, and `strict` a failure). The same build
`make docs` runs, into a temporary directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's banner is not a warning
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site/reference/configuration/index.html").is_file()
    assert (tmp_path / "site/reference/cli/index.html").is_file()


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    """The validation settings really fail a build: a copy of the site with one link to
    an anchor the configuration page does not have."""
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    (tmp_path / "mkdocs.yml").write_text(
        (REPO / "mkdocs.yml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    index = docs / "index.md"
    index.write_text(
        index.read_text(encoding="utf-8") + "\n[x](reference/configuration.md#no-such-key)\n",
        encoding="utf-8",
    )
    result = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-key" in result.stdout + result.stderr
