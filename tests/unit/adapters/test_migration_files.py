"""Finding the migrations: the package's copy when installed, `sql/` in a checkout, and
never a silent success when there are none."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.adapters import postgres
from gateway.errors import MigrationsMissing

REPO_SQL = Path(__file__).resolve().parents[3] / "sql"


def test_a_source_checkout_reads_the_top_level_sql_directory() -> None:
    assert postgres.default_sql_dir() == REPO_SQL
    names = [p.name for p in postgres.migration_files()]
    assert names == sorted(p.name for p in REPO_SQL.glob("[0-9][0-9][0-9]_*.sql"))
    assert names[0] == "001_ingest.sql"


def test_only_numbered_sql_files_count_in_number_order(tmp_path: Path) -> None:
    for name in ("010_late.sql", "002_early.sql", "notes.sql", "003_x.txt", "README"):
        (tmp_path / name).write_text("SELECT 1;", encoding="utf-8")
    (tmp_path / "004_dir.sql").mkdir()
    assert [p.name for p in postgres.migration_files(tmp_path)] == ["002_early.sql", "010_late.sql"]


@pytest.mark.parametrize("where", ["empty", "missing"])
async def test_no_migrations_at_all_is_an_error_before_connecting(
    tmp_path: Path, where: str
) -> None:
    sql_dir = tmp_path / "sql"
    if where == "empty":
        sql_dir.mkdir()
    # Nothing listens on port 1: reaching the database would fail differently.
    with pytest.raises(MigrationsMissing, match="no migration files"):
        await postgres.migrate("postgresql://127.0.0.1:1/none", sql_dir)
