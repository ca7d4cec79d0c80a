"""The type and default of settings that are not dataclass fields, read from the calls
that read them: `read_value(data, "tolerance_s", path, int, 300)` says that
`tolerance_s` is an integer and 300 when absent. Keys read otherwise (lists checked by
hand, secrets) state theirs in their `#:` block (`field_docs`).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from types import ModuleType
from typing import Any

#: A default that is an expression of the call's context (`DEFAULT_API_URLS[scheme]`):
#: the key's `#:` block must say it (`default: ...`).
UNKNOWN: Any = object()


@dataclass(frozen=True)
class Read:
    """What one `read_value` call says about its key."""

    kind: str  # the Python type's name: str, int, float, bool, tuple
    default: Any  # a value, None (absent), or UNKNOWN


def read_value_calls(module: ModuleType) -> dict[str, Read]:
    """Every `read_value(table, "KEY", path, KIND, DEFAULT)` in `module`, by key."""
    found: dict[str, Read] = {}
    for function in ast.walk(ast.parse(inspect.getsource(module))):
        if not isinstance(function, ast.FunctionDef):
            continue
        instances = _instances(function, module)
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "read_value"
                and len(node.args) >= 5
                and isinstance(key := node.args[1], ast.Constant)
                and isinstance(key.value, str)
                and isinstance(kind := node.args[3], ast.Name)
            ):
                found[key.value] = Read(kind.id, _default(node.args[4], instances))
    return found


def _instances(function: ast.FunctionDef, module: ModuleType) -> dict[str, Any]:
    """Names bound in `function` to a settings dataclass built with no arguments
    (`d = ApiLimits()`), so `d.max_pages` as a default is that field's default."""
    bound: dict[str, Any] = {}
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(target := node.targets[0], ast.Name)
            and isinstance(call := node.value, ast.Call)
            and isinstance(call.func, ast.Name)
            and not call.args
            and not call.keywords
            and isinstance(cls := getattr(module, call.func.id, None), type)
        ):
            bound[target.id] = cls()
    return bound


def _default(node: ast.expr, instances: dict[str, Any]) -> Any:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in instances
    ):
        return getattr(instances[node.value.id], node.attr)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return UNKNOWN
