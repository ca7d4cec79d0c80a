"""The generated reference pages match the code they come from, and say everything.

Each page under docs/reference/ is rendered again and compared with the committed file;
the configuration page names every key of every settings class, and its environment
variables cover every one the parser reads; the CLI page has a section for every
command and sub-command. The `#:` comment convention the configuration page reads is
shown to work on a class of its own.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli import build_parser
from gateway.devtools import docs_reference
from gateway.devtools.docs_reference import cli, configuration, field_docs
from gateway.settings import config, provider_api, senders

REGENERATE = "python -m gateway.devtools.docs_reference"


@pytest.mark.parametrize("path", sorted(docs_reference.PAGES))
def test_each_committed_page_is_what_the_code_renders(path: str) -> None:
    committed = docs_reference.DOCS_DIR / path
    assert committed.is_file(), f"docs/{path} is missing: run `{REGENERATE}`"
    assert committed.read_text(encoding="utf-8") == docs_reference.PAGES[path](), (
        f"docs/{path} is stale: run `{REGENERATE}` and commit the result"
    )


def test_write_all_then_stale_finds_nothing(tmp_path: Path) -> None:
    assert sorted(docs_reference.write_all(tmp_path)) == sorted(docs_reference.PAGES)
    assert docs_reference.stale(tmp_path) == []
    page = tmp_path / "reference/configuration.md"
    page.write_text(page.read_text(encoding="utf-8") + "hand edit\n", encoding="utf-8")
    assert docs_reference.stale(tmp_path) == ["reference/configuration.md"]
    assert docs_reference.write_all(tmp_path) == ["reference/configuration.md"]


def test_the_check_names_a_stale_page_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.devtools.docs_reference.__main__ import main

    assert main(["--docs", str(tmp_path), "--check"]) == 1
    assert "stale: docs/reference/cli.md" in capsys.readouterr().out
    assert main(["--docs", str(tmp_path)]) == 0
    assert main(["--docs", str(tmp_path), "--check"]) == 0


def _settings_sections() -> dict[str, type]:
    """Each dataclass table of `Settings`, by its table name."""
    hints = typing.get_type_hints(config.Settings)
    return {
        name: cls
        for name, cls in hints.items()
        if isinstance(cls, type) and dataclasses.is_dataclass(cls)
    }


def test_the_configuration_page_names_every_key_of_every_section() -> None:
    page = configuration.render()
    expected = [
        f"{section}.{f.name}"
        for section, cls in _settings_sections().items()
        for f in dataclasses.fields(cls)
    ]
    expected += ["database.url", "redis.url"]
    expected += [f"providers.NAME.{k}" for k in senders.PROVIDER_KEYS if k != "backfill"]
    expected += [f"providers.NAME.backfill.{k}" for k in provider_api.SCHEDULE_KEYS]
    expected += [f"services.NAME.{k}" for k in senders.SERVICE_KEYS]
    missing = [key for key in expected if f"### `{key}` {{#" not in page]
    assert not missing, f"not on the configuration page: {missing}"
    for section in config.SECTIONS:
        assert f"## `[{section}" in page, f"table [{section}] is not on the page"


def test_every_key_has_a_description() -> None:
    blank = [k.path for t in configuration.tables() for k in t.keys if not k.text]
    assert not blank, f"keys without a `#:` description: {blank}"


def test_every_environment_variable_the_parser_reads_is_on_the_page() -> None:
    """`env.get("X")` / `env["X"]` in settings/config.py, and `GATEWAY_{SECTION}_URL`
    for each URL it reads with `read_url`."""
    tree = ast.parse(inspect.getsource(config))
    names: set[str] = {config.CONFIG_ENV}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) == "read_url":
            names.add(f"GATEWAY_{_text(node.args[2]).upper()}_URL")
        elif isinstance(node, ast.Call) and _called(node) == "env.get":
            names.add(_text(node.args[0]))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "env"
        ):
            names.add(_text(node.slice))
    names.discard("")
    environment = configuration.render().split("## Environment variables", 1)[1]
    environment = environment.split("\n## ", 1)[0]
    missing = sorted(name for name in names if f"`{name}" not in environment)
    assert len(names) >= 8
    assert not missing, f"environment variables missing from the page: {missing}"


def _text(node: ast.expr) -> str:
    """A string constant's value; "" for any other expression (`env.get(CONFIG_ENV)`)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _called(call: ast.Call) -> str:
    """`read_url` or `env.get` for a call of that name."""
    return ast.unparse(call.func)


def test_anchors_follow_the_documented_scheme() -> None:
    assert configuration.anchor("http", "max_body_bytes") == "http-max_body_bytes"
    assert configuration.anchor("providers.NAME", "secret_env") == "providers-secret_env"
    assert configuration.anchor("providers.NAME.backfill") == "providers-backfill"
    anchors = [k.anchor for t in configuration.tables() for k in t.keys]
    anchors += [t.anchor for t in configuration.tables()]
    assert len(anchors) == len(set(anchors)), "two settings share an anchor"


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    found = [parser.prog]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _commands(sub)
    return found


def test_the_cli_page_has_every_command_and_subcommand() -> None:
    page = cli.render()
    commands = _commands(build_parser())
    assert {"gateway dlq replay", "gateway ledger check", "gateway retention run"} <= set(commands)
    missing = [c for c in commands if f"`{c}` {{#{cli.anchor(c)}}}" not in page]
    assert not missing, f"not on the CLI page: {missing}"


def test_the_cli_page_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = cli.render()
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.render() == narrow


SAMPLE = """
from dataclasses import dataclass

LIMIT = (4, 16)


@dataclass(frozen=True)
class Sample:
    # A note for readers of the code, not for the page.
    #: How many, at least {{LIMIT[0]}}.
    #:
    #: A second paragraph.
    #: allowed: {{LIMIT[0]}} to
    #:     {{LIMIT[1]}}
    count: int = 4
    name: str = "x"  #: The name.
    undocumented: bool = False


KEYS = (
    #: The first key.
    #: type: list of strings
    "first",
    "second",
)
"""


@pytest.fixture
def sample_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    (tmp_path / "docs_sample_mod.py").write_text(SAMPLE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("docs_sample_mod")
    sys.modules.pop("docs_sample_mod", None)


def test_the_comment_convention(sample_module: types.ModuleType) -> None:
    docs = field_docs.class_docs(sample_module.Sample)
    assert docs["count"].text == "How many, at least 4.\n\nA second paragraph."
    assert docs["count"].fields == {"allowed": "4 to 16"}
    assert docs["name"].text == "The name."
    assert docs["undocumented"] == field_docs.KeyDoc()
    keys = field_docs.tuple_docs(sample_module, "KEYS")
    assert keys["first"] == field_docs.KeyDoc("The first key.", {"type": "list of strings"})
    assert keys["second"] == field_docs.KeyDoc()
