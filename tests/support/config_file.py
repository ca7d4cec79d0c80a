"""Write a config document as the TOML file a process reads."""

from __future__ import annotations

import json
from pathlib import Path


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return str(value)


def write_toml(path: Path, doc: dict[str, dict[str, object]]) -> Path:
    """A TOML file for `doc` (two levels of tables, as the gateway's config has)."""
    lines: list[str] = []
    for section, values in doc.items():
        nested = {k: v for k, v in values.items() if isinstance(v, dict)}
        plain = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if plain:
            lines.append(f"[{section}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in plain.items()]
        for name, table in nested.items():
            lines.append(f"[{section}.{name}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
