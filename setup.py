"""Build step pyproject.toml cannot express: ship the top-level `sql/` migrations inside
the wheel, as `gateway/_sql/`.

`sql/` stays at the top of the repository (the project's agreed layout); an installed
gateway finds its migrations with importlib.resources, a source checkout or an editable
install reads `sql/` itself (`gateway.adapters.postgres.migrations`).
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SQL_SOURCE = Path(__file__).resolve().parent / "sql"
SQL_TARGET = ("gateway", "_sql")


class BuildPyWithMigrations(build_py):
    """`build_py`, then `sql/*.sql` copied to `gateway/_sql/` in the build tree."""

    def run(self) -> None:
        super().run()
        # An editable install maps `gateway` to the source tree, where the migrations
        # are read from `sql/` directly: nothing to copy.
        if getattr(self, "editable_mode", False):
            return
        files = sorted(SQL_SOURCE.glob("[0-9][0-9][0-9]_*.sql"))
        if not files:
            raise SystemExit(f"no migrations found in {SQL_SOURCE}: refusing to build")
        target = Path(self.build_lib, *SQL_TARGET)
        self.mkpath(str(target))
        for path in files:
            self.copy_file(str(path), str(target / path.name))


setup(cmdclass={"build_py": BuildPyWithMigrations})
