"""The configuration reference (`docs/reference/configuration.md`), generated from the
settings classes in `gateway.settings` (and `gateway.core.health.alerting.AlertSettings`).

Every table of the file and every key in it, in the order `gateway.settings.config`
lists the tables: its type, default, allowed values, the environment variables that
override it, and a description. Types and defaults come from the dataclasses (or, for
the `[providers.NAME]` and `[services.NAME]` keys, from the calls that read them), the
rule that numbers are positive unless zero turns something off from the parser, and
the words from each setting's `#:` comment (`field_docs` describes the convention).

Anchors, for links from other pages (stable: they change only with the key's name):

- a key: its table and name joined by `-`, without `NAME`: `#http-max_body_bytes`,
  `#providers-secret_env`, `#providers-backfill-interval_s`;
- a table: `#http`, `#providers`, `#providers-backfill`;
- the environment variables: `#environment-variables`.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gateway.devtools.docs_reference import reads
from gateway.devtools.docs_reference.field_docs import KeyDoc, class_docs, tuple_docs
from gateway.devtools.docs_reference.text import code, generated_header, table
from gateway.settings import config, forward, provider_api, scheme_params, senders

#: How each Python type of a setting reads in TOML terms.
_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "tuple[str, ...]": "list of strings",
    "tuple[float, ...]": "list of numbers",
}
#: `read_value`'s kinds (`reads`) in the same terms; its `tuple` is a list of strings.
_KINDS = {**_TYPES, "tuple": "list of strings"}


@dataclass(frozen=True)
class Key:
    """One documented setting."""

    table: str  # "http", "providers.NAME", "providers.NAME.backfill"
    name: str
    kind: str
    default: str
    allowed: str
    env: str
    text: str

    @property
    def path(self) -> str:
        return f"{self.table}.{self.name}"

    @property
    def anchor(self) -> str:
        return anchor(self.table, self.name)


@dataclass(frozen=True)
class Table:
    """One table of the file, its description and its keys."""

    name: str
    text: str
    keys: list[Key]

    @property
    def anchor(self) -> str:
        return anchor(self.name)


def anchor(table: str, key: str = "") -> str:
    """`anchor("providers.NAME", "secret_env")` -> `providers-secret_env`."""
    return "-".join([p for p in table.split(".") if p != "NAME"] + ([key] if key else []))


def tables() -> list[Table]:
    """Every table of the configuration file, in `config.SECTIONS` order."""
    hints = typing.get_type_hints(config.Settings)
    settings_docs = class_docs(config.Settings)
    found: list[Table] = []
    for section in config.SECTIONS:
        if section in ("database", "redis"):
            # The URL is kept on `Settings` itself (`database_url`); `[database]` has
            # its other keys in a section class of its own.
            doc = settings_docs[f"{section}_url"]
            keys = [_key(section, "url", "str", None, "", doc)]
            cls = hints.get(section)
            text = _class_text(cls) if cls else ""
            keys += list(_dataclass_keys(section, cls)) if cls else []
            found.append(Table(section, text, keys))
        elif section == "providers":
            found += _providers()
        elif section == "forward":
            cls = forward.ForwardSettings
            keys = list(_dataclass_keys("forward.NAME", cls))
            found.append(Table("forward.NAME", _class_text(cls), keys))
        elif section == "services":
            reads_ = reads.read_value_calls(senders)
            docs = tuple_docs(senders, "SERVICE_KEYS")
            keys = [_tuple_key("services.NAME", k, docs, reads_) for k in senders.SERVICE_KEYS]
            found.append(Table("services.NAME", _class_text(senders.ServiceSettings), keys))
        else:
            cls = hints[section]
            found.append(Table(section, _class_text(cls), list(_dataclass_keys(section, cls))))
    return found


def _class_text(cls: type) -> str:
    """A class's docstring, without the `` `[table]`: `` that opens some of them."""
    text = inspect.getdoc(cls) or ""
    text = re.sub(r"^`\[[a-z.]+\]`:\s*", "", text)
    return text[:1].upper() + text[1:]


def _dataclass_keys(section: str, cls: type) -> Iterator[Key]:
    docs = class_docs(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        yield _key(section, f.name, str(f.type), getattr(defaults, f.name), "", docs[f.name])


def _providers() -> list[Table]:
    docs = {
        **tuple_docs(senders, "PROVIDER_KEYS"),
        **tuple_docs(provider_api, "API_KEYS"),
    }
    found = {
        **reads.read_value_calls(senders),
        **reads.read_value_calls(scheme_params),
        **reads.read_value_calls(provider_api),
    }
    keys = [
        _tuple_key("providers.NAME", k, docs, found)
        for k in senders.PROVIDER_KEYS
        if k != "backfill"  # a table of its own, below
    ]
    schedule_docs = tuple_docs(provider_api, "SCHEDULE_KEYS")
    schedule = [
        _tuple_key("providers.NAME.backfill", k, schedule_docs, found)
        for k in provider_api.SCHEDULE_KEYS
    ]
    return [
        Table("providers.NAME", _class_text(senders.ProviderSettings), keys),
        Table("providers.NAME.backfill", docs["backfill"].text, schedule),
    ]


def _tuple_key(table: str, name: str, docs: dict[str, KeyDoc], found: dict[str, reads.Read]) -> Key:
    read = found.get(name)
    kind, default = (read.kind, read.default) if read else ("", reads.UNKNOWN)
    return _key(table, name, kind, default, "", docs.get(name, KeyDoc()), dataclass_field=False)


def _key(
    table: str,
    name: str,
    kind: str,
    default: Any,
    allowed: str,
    doc: KeyDoc,
    *,
    dataclass_field: bool = True,
) -> Key:
    """One key: what the code says, then what its `#:` block adds or overrides."""
    type_name = doc.fields.get("type") or _KINDS.get(kind, "")
    if not type_name:
        raise LookupError(f"{table}.{name}: no type (add `#: type: ...` to its comment)")
    if "default" in doc.fields:
        shown_default = doc.fields["default"]
    elif default is reads.UNKNOWN:
        raise LookupError(f"{table}.{name}: no default (add `#: default: ...` to its comment)")
    else:
        shown_default = "none" if default is None else code(_toml(default))
    rules = [_generic_rule(name, type_name)] if dataclass_field else []
    rules += [allowed, doc.fields.get("allowed", "")]
    return Key(
        table=table,
        name=name,
        kind=type_name,
        default=shown_default,
        allowed="; ".join(r for r in rules if r),
        env=doc.fields.get("env", ""),
        text=doc.text,
    )


def _generic_rule(name: str, type_name: str) -> str:
    """What `gateway.settings.values.read_section` holds every value of a kind to."""
    if type_name in ("integer", "number"):
        return "≥ 0" if name in config._ZERO_OK else "> 0"
    if type_name == "list of numbers":
        return "a non-empty list of positive numbers"
    if type_name == "list of strings":
        return "a non-empty list"
    return ""


def _toml(value: Any) -> str:
    """A default as it would be written in the file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def render() -> str:
    """The whole page."""
    found = tables()
    parts = [
        generated_header("gateway/settings/ (the settings classes and their #: comments)"),
        "# Configuration reference\n\n",
        "The gateway reads one TOML file, named by `--config PATH` or by "
        f"{code(config.CONFIG_ENV)}. The whole file is checked at start-up by every "
        "command: a bad value, or a table or key the gateway does not know, stops it with "
        "one line naming the key's full path (and, for a typo, the key probably meant). "
        "Durations are in seconds (`_s`) unless the name says otherwise (`_us`).\n\n",
        "Tables: " + ", ".join(f"[{code(f'[{t.name}]')}](#{t.anchor})" for t in found) + ".\n\n",
        _environment(found),
    ]
    parts += [_table(t) for t in found]
    return "".join(parts).rstrip("\n") + "\n"


def _environment(found: list[Table]) -> str:
    rows = [[code(config.CONFIG_ENV), "the config file, when `--config` is not given"]]
    rows += [[k.env, f"[{code(k.path)}](#{k.anchor})"] for t in found for k in t.keys if k.env]
    return (
        "## Environment variables {#environment-variables}\n\n"
        "Set in the environment, these win over the file, so one file can serve several "
        "environments.\n\n" + table(["variable", "sets"], rows) + "\n"
    )


def _table(t: Table) -> str:
    out = [f"## {code(f'[{t.name}]')} {{#{t.anchor}}}\n\n"]
    if t.text:
        out.append(f"{t.text}\n\n")
    out += [_key_section(k) for k in t.keys]
    return "".join(out)


def _key_section(k: Key) -> str:
    facts: list[tuple[str, str]] = [("Type", k.kind), ("Default", k.default)]
    facts += [(label, v) for label, v in (("Allowed", k.allowed), ("Overridden by", k.env)) if v]
    lines = "".join(f"- {label}: {value}\n" for label, value in facts)
    text = f"{k.text}\n\n" if k.text else ""
    return f"### {code(k.path)} {{#{k.anchor}}}\n\n{text}{lines}\n"
