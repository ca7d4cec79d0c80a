"""The deployment page's "build the big indexes first" statements are the migrations'
own: the same names, tables, columns and predicates, so that `gateway migrate` finds
each one built and has nothing left to lock."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATEMENT = re.compile(r"CREATE INDEX (?:CONCURRENTLY )?IF NOT EXISTS (\w+)\s+(ON [^;]+);")


def _indexes(text: str) -> dict[str, str]:
    return {m[1]: " ".join(m[2].split()) for m in STATEMENT.finditer(text)}


def test_the_upgrade_statements_match_the_console_migrations() -> None:
    page = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    upgrade = page.split("### Upgrading a large database", 1)[1]
    documented = _indexes(upgrade)
    migrations = sorted((REPO / "sql").glob("01[6-9]_*.sql"))
    assert migrations, "the console's migrations moved: update this test and the page"
    created: dict[str, str] = {}
    for path in migrations:
        created |= _indexes(path.read_text(encoding="utf-8"))
    assert documented == created
