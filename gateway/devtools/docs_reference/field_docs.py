"""Reading the `#:` documentation comments of settings from their source.

The convention (Sphinx's, already used across `gateway.settings`): a block of `#:`
lines directly above a dataclass field, or directly above one string of a module-level
tuple of key names (`PROVIDER_KEYS`), documents that setting for users; a trailing
`#:` comment on the field's own line does too. Plain `#` comments stay notes for
whoever reads the code.

Inside a block, a line `type: ...`, `default: ...`, `allowed: ...` or `env: ...` is a
field (its next lines continue it when indented further), and the other lines are the
description (Markdown; an empty `#:` line starts a new paragraph). `{{NAME}}` or
`{{NAME[0]}}` is replaced by the value of the module's constant `NAME`, so a bound
written in code is quoted, not copied.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import sys
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

#: The field names a `#:` block may set.
FIELDS = ("type", "default", "allowed", "env")
_FIELD = re.compile(rf"^({'|'.join(FIELDS)}):\s*(.*)$")
_CONSTANT = re.compile(r"\{\{([A-Z_][A-Z0-9_]*)(?:\[(\d+)\])?\}\}")


@dataclass(frozen=True)
class KeyDoc:
    """One setting's documentation: its description and its `type:`/`default:`/... fields."""

    text: str = ""
    fields: Mapping[str, str] = field(default_factory=dict)


def class_docs(cls: type) -> dict[str, KeyDoc]:
    """The `#:` documentation of each annotated field of `cls`, by field name."""
    module = sys.modules[cls.__module__]
    tree, comments, lines = _parse(module)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {
                stmt.target.id: _doc_at(stmt, comments, lines, module)
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    raise LookupError(f"class {cls.__name__} not found in {module.__name__}")


def tuple_docs(module: ModuleType, name: str) -> dict[str, KeyDoc]:
    """The `#:` documentation of each string in the module-level tuple `name`."""
    tree, comments, lines = _parse(module)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            if not isinstance(node.value, ast.Tuple):
                raise TypeError(f"{module.__name__}.{name} is not a tuple literal")
            return {
                element.value: _doc_at(element, comments, lines, module)
                for element in node.value.elts
                if isinstance(element, ast.Constant) and isinstance(element.value, str)
            }
    raise LookupError(f"{name} not found in {module.__name__}")


def _parse(module: ModuleType) -> tuple[ast.Module, dict[int, str], list[str]]:
    source = inspect.getsource(module)
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    return ast.parse(source), comments, source.splitlines()


def _doc_at(
    node: ast.AST, comments: dict[int, str], lines: list[str], module: ModuleType
) -> KeyDoc:
    """The `#:` lines directly above `node`'s first line, then a trailing `#:` on it."""
    first = getattr(node, "lineno", 0)
    last = getattr(node, "end_lineno", first) or first
    block: list[str] = []
    line = first - 1
    while line >= 1 and lines[line - 1].lstrip().startswith("#:"):
        block.insert(0, lines[line - 1].lstrip()[2:].rstrip())
        line -= 1
    for line in range(first, last + 1):
        trailing = comments.get(line, "")
        if trailing.startswith("#:") and not lines[line - 1].lstrip().startswith("#"):
            block.append(trailing[2:].rstrip())
    return _split(block, vars(module))


def _split(block: list[str], namespace: Mapping[str, Any]) -> KeyDoc:
    paragraphs: list[list[str]] = [[]]
    fields: dict[str, str] = {}
    last_field = ""
    for raw in block:
        text = _CONSTANT.sub(lambda m: _quote(namespace, m.group(1), m.group(2)), raw.strip())
        found = _FIELD.match(text)
        if found:
            last_field = found.group(1)
            fields[last_field] = found.group(2)
        elif last_field and raw.startswith("   "):  # `#:` + a space + an indent
            fields[last_field] += " " + text
        elif not text:
            last_field = ""
            paragraphs.append([])
        else:
            last_field = ""
            paragraphs[-1].append(text)
    body = "\n\n".join(" ".join(p) for p in paragraphs if p)
    return KeyDoc(body, fields)


def _quote(namespace: Mapping[str, Any], name: str, index: str | None) -> str:
    """A constant's value as the page shows it: numbers plain, the rest as code."""
    if name not in namespace:
        raise LookupError(f"{{{{{name}}}}}: no such constant")
    value = namespace[name]
    if index is not None:
        value = value[int(index)]
    return render_value(value)


def render_value(value: Any) -> str:
    """A Python value as Markdown: numbers plain, strings and sequences as code."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"{value:,}" if isinstance(value, int) else f"{value:g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {render_value(v)}" for k, v in value.items())
    if isinstance(value, tuple | list | frozenset | set):
        return ", ".join(render_value(v) for v in value)
    return f"`{value}`"
