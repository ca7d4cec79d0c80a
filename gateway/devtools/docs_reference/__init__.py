"""The documentation site's reference pages, generated from the code they describe.

`PAGES` maps a page's path under `docs/` to the function that renders it; `write_all`
rewrites them and `stale` names the ones that differ from what the code renders now
(`python -m gateway.devtools.docs_reference [--check]`; a unit test runs the check).
A page here is never edited by hand: change the code it comes from (settings classes,
argparse help, the OpenAPI document, `ErrorClass`) and regenerate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gateway.devtools.docs_reference import (
    cli,
    configuration,
    error_codes,
    http_api,
    movements,
    providers,
)

__all__ = ["DOCS_DIR", "PAGES", "stale", "write_all"]

#: The repository's `docs/` (mkdocs.yml's `docs_dir`), where the pages are committed.
DOCS_DIR = Path(__file__).resolve().parents[3] / "docs"

#: Each generated page, by its path under `docs/`, and its renderer.
PAGES: dict[str, Callable[[], str]] = {
    "reference/configuration.md": configuration.render,
    "reference/cli.md": cli.render,
    "reference/http-api.md": http_api.render,
    "reference/error-codes.md": error_codes.render,
    "reference/movements.md": movements.render,
    "reference/providers.md": providers.render,
}


def write_all(root: Path = DOCS_DIR) -> list[str]:
    """Render every page into `root`; the paths whose content changed."""
    changed = []
    for path, render in PAGES.items():
        target = root / path
        text = render()
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def stale(root: Path = DOCS_DIR) -> list[str]:
    """The pages under `root` that are missing or differ from what the code renders."""
    return [
        path
        for path, render in PAGES.items()
        if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != render()
    ]
