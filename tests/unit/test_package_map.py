"""The package map of docs/development.md is what the tree renders, and the renderer
follows the tree: a package, a module or a docstring changed makes the map stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.devtools import package_map

REGENERATE = "python -m gateway.devtools.package_map"


def test_the_committed_map_is_what_the_tree_renders() -> None:
    assert not package_map.stale(), (
        f"the package map of docs/development.md is stale: run `{REGENERATE}` and commit it"
    )


def test_every_package_of_the_gateway_stands_in_the_map() -> None:
    map_text = package_map.render()
    gateway = package_map.ROOT / "gateway"
    for init in sorted(gateway.rglob("*/__init__.py")):
        assert f" {init.parent.name}/ " in map_text, f"{init.parent} is missing from the map"


def _tree(root: Path) -> None:
    files = {
        "gateway/__init__.py": '"""The package."""\n',
        "gateway/client.py": '"""A client. More about it."""\n',
        "gateway/core/__init__.py": '"""Pure decisions."""\n',
        "gateway/core/money.py": '"""Money."""\n',
        "gateway/core/dlq/__init__.py": '"""Dead letters, decided."""\n',
        "gateway/core/dlq/filters.py": '"""Filters."""\n',
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def test_a_tree_renders_its_modules_packages_and_first_sentences(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert package_map.render(tmp_path) == (
        "```\n"
        "gateway/\n"
        "  client.py      A client.\n"
        "  core/          Pure decisions. Modules: money.\n"
        "    dlq/           Dead letters, decided. Modules: filters.\n"
        "```\n"
    )


def test_a_moved_module_makes_the_map_stale(tmp_path: Path) -> None:
    _tree(tmp_path)
    page = tmp_path / "development.md"
    page.write_text(
        f"# Development\n\n{package_map.BEGIN}\n{package_map.END}\n\nafter\n", encoding="utf-8"
    )
    assert package_map.stale(page, tmp_path)
    page.write_text(
        package_map.splice(page.read_text(encoding="utf-8"), package_map.render(tmp_path)),
        encoding="utf-8",
    )
    assert not package_map.stale(page, tmp_path)
    assert page.read_text(encoding="utf-8").endswith(f"{package_map.END}\n\nafter\n")
    (tmp_path / "gateway/core/money.py").rename(tmp_path / "gateway/core/dlq/money.py")
    assert package_map.stale(page, tmp_path)


def test_a_page_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="package map"):
        package_map.splice("# Development\n", "```\n```\n")
