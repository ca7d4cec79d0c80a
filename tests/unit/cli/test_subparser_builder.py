"""One sub-parser builder: every command family's sub-commands are made by
`common.operator_family`, so they all report in one line, take the common flags and read
their help the same way. Only `common.py` (the builder) and `__init__.py` (the top-level
`gateway COMMAND`) may call argparse's `add_subparsers`; read from the source with `ast`.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[3] / "gateway" / "cli"

#: The files, relative to the CLI package, that may build a sub-command table.
BUILDERS = frozenset({"common.py", "__init__.py"})


def add_subparsers_uses(package: Path, allowed: frozenset[str] = BUILDERS) -> list[str]:
    """`file:line` of every `.add_subparsers` under `package` outside `allowed`: a call,
    or the method taken to be called later."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [
            f"{name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "add_subparsers"
        ]
    return found


def test_only_the_builder_and_the_top_level_call_add_subparsers() -> None:
    """`ledger`, `retention`, `console`, `dlq` and the rest use `operator_family`."""
    assert add_subparsers_uses(CLI) == []


def test_the_check_sees_the_calls_it_allows() -> None:
    """Not vacuous: with nothing allowed it finds the builder's and the top level's."""
    found = add_subparsers_uses(CLI, allowed=frozenset())
    assert sorted({use.split(":")[0] for use in found}) == ["__init__.py", "common.py"]


ALLOWED_TREE = {
    "__init__.py": "sub = parser.add_subparsers(dest='command', required=True)\n",
    "common.py": "def family(p):\n    return p.add_subparsers(dest='x')\n",
    "ledger.py": "family = operator_family(parser, 'ledger_command')\n",
}


@pytest.mark.parametrize(
    ("name", "source", "reported"),
    [
        (
            "ledger.py",
            "commands = parser.add_subparsers(dest='ledger_command', metavar='COMMAND')\n",
            "ledger.py:1",
        ),
        (
            "console.py",
            """\
            def add_commands(sub, common):
                console = sub.add_parser("console")
                families = console.add_subparsers(dest="console_command", required=False)
            """,
            "console.py:3",
        ),
        ("retention.py", "make = parser.add_subparsers\ncommands = make()\n", "retention.py:1"),
        # Only the package's own `__init__.py` is the top level, not a sub-package's.
        ("admin/__init__.py", "sub = parser.add_subparsers()\n", "admin/__init__.py:1"),
    ],
)
def test_a_sub_parser_table_built_by_hand_is_reported(
    tmp_path: Path, name: str, source: str, reported: str
) -> None:
    """A module that calls (or takes) `add_subparsers` itself is named with its line."""
    for file, text in {**ALLOWED_TREE, name: source}.items():
        path = tmp_path / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    assert add_subparsers_uses(tmp_path) == [reported]
    # The same tree without the offending module keeps the rule.
    (tmp_path / name).unlink()
    assert add_subparsers_uses(tmp_path) == []
