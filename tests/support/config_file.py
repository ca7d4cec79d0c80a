"""Write a config document as the TOML file a process reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The two settings every config must name (there is no default database or NATS):
#: nothing listens on port 1, so a test that only parses reaches nothing by mistake.
REQUIRED_URLS: dict[str, dict[str, object]] = {
    "database": {"url": "postgresql://127.0.0.1:1/unused"},
    "nats": {"url": "nats://127.0.0.1:1"},
}


def with_urls(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with the required URLs added where it does not set its own."""
    return {**{k: dict(v) for k, v in REQUIRED_URLS.items()}, **doc}


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
