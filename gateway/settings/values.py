"""Typed readers for TOML tables: each error names the key it complains about.

Generic on purpose: `gateway.settings` says which keys exist; these say what a valid
value of each kind looks like.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from gateway.core.database_hosts import WRITABLE_ATTRS, HostListInvalid, split_hosts
from gateway.errors import ConfigError

#: The user-info part of a URL (`user:password@`, or a NATS token `token@`): up to the
#: last `@` before the path. Several URLs may share one string, comma-separated.
_USERINFO = re.compile(r"://[^/?#]*@")
#: An environment variable name that is safe to repeat in an error: the usual upper-case
#: spelling. Secrets are not spelt that way (`whsec_`, `sk_live_`, base64), so a secret
#: pasted where its variable's name belongs is not echoed back.
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def redact_url(url: str) -> str:
    """`url` with any user name, password or token replaced by `***`."""
    return _USERINFO.sub("://***@", url)


def url_hosts(url: str, default_port: int) -> str:
    """Where a connection URL leads, without its credentials: `db.internal:5432`, or
    `a:4222, b:4222` for a list of servers (NATS) or of hosts (`postgresql://a,b/db`).

    For an operator's error line: the user name, password, path and query stay out, so
    nothing secret is printed and the line still says which server did not answer.
    """
    hosts: list[str] = []
    for one in url.split(",") if url.count("://") > 1 else [url]:
        rest = one.strip().partition("://")[2] if "://" in one else one.strip()
        before_query, _, query = rest.partition("?")
        # Past the last `@` before the query: a password with an unescaped `/` in it
        # must not be mistaken for the host.
        netloc = re.split(r"[/#]", before_query.rpartition("@")[2], maxsplit=1)[0]
        if not netloc:  # libpq's `?host=/run/postgresql` (a socket directory)
            netloc = next((v for k, _, v in _params(query) if k == "host"), "")
        for host in netloc.split(",") if netloc else [""]:
            if not host:
                hosts.append("the default host")  # PGHOST, or the local socket
            elif host.startswith("/"):
                hosts.append(host)
            elif host.endswith("]") or ":" not in host:  # [::1] or no port
                hosts.append(f"{host}:{default_port}")
            else:
                hosts.append(host)
    return ", ".join(hosts)


def _params(query: str) -> list[tuple[str, str, str]]:
    return [part.partition("=") for part in query.split("&")]


def redacted_repr(self: Any) -> str:
    """A settings dataclass's repr with credentials kept out.

    Fields declared with `repr=False` (secrets, tokens) are left out; every string is
    passed through `redact_url`, so a password in a connection URL is never printed.
    """
    shown = []
    for f in dataclasses.fields(self):
        if f.repr:
            value = getattr(self, f.name)
            text = repr(redact_url(value)) if isinstance(value, str) else repr(value)
            shown.append(f"{f.name}={text}")
    return f"{type(self).__name__}({', '.join(shown)})"


def env_name_shown(name: str) -> str:
    """How an error may name an environment variable: by name, unless it may be a secret."""
    if _ENV_NAME.fullmatch(name):
        return f"environment variable {name}"
    return "the environment variable named there"


#: The most characters of an unknown key an error repeats: enough to find the typo.
_KEY_SHOWN_CHARS = 64


# Settings that existed once: a file that still sets one learns why it is gone.
REMOVED = {
    "outbox.relay_after_s": "removed: the relay now follows every commit through the outbox "
    "cursor, so there is no confirmation to wait for; delete the line",
}


def refuse_unknown(table: Mapping[str, Any], path: str, known: Collection[str]) -> None:
    """Refuse the first key of `table` that is not in `known`, naming its full path and
    the closest known key, so a typo never silently falls back to a default."""
    for key in table:
        if f"{path}{key}" in REMOVED:
            raise ConfigError(f"{path}{key}", REMOVED[f"{path}{key}"])
        if key not in known:
            shown = key if len(key) <= _KEY_SHOWN_CHARS else key[:_KEY_SHOWN_CHARS] + "..."
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
            hint = f"; did you mean {path}{close[0]}?" if close else ""
            raise ConfigError(f"{path}{shown}", f"unknown setting{hint}")


def read_table(data: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}{key}", "must be a table")
    return value


def read_value(
    data: Mapping[str, Any],
    key: str,
    path: str,
    kind: type,
    default: Any,
    *,
    secret: bool = False,
) -> Any:
    """`data[key]` checked to be a `kind`, or `default` when absent.

    The error repeats a wrong value so it can be found, except for a `secret` one: then
    only its type is named.
    """
    if key not in data:
        return default
    value = data[key]
    if kind is tuple:
        return read_list(
            value, f"{path}{key}", numbers=bool(default) and isinstance(default[0], float)
        )
    # bool is an int in Python; a `true` where a number belongs is still a mistake.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        got = type(value).__name__ if secret else repr(value)
        raise ConfigError(f"{path}{key}", f"must be {kind.__name__}, got {got}")
    return value


def read_list(value: Any, key: str, numbers: bool) -> tuple[Any, ...]:
    """A non-empty list of strings, or of positive numbers (delays)."""
    if numbers:
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in value)
        what = "positive numbers"
    else:
        ok = all(isinstance(v, str) and v for v in value)
        what = "strings"
    if not isinstance(value, list) or not value or not ok:
        raise ConfigError(key, f"must be a non-empty list of {what}")
    return tuple(float(v) for v in value) if numbers else tuple(value)


def require_positive(value: float, key: str) -> None:
    # TOML has `nan` and `inf`: `nan <= 0` is false, and either would reach a timer.
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(key, f"must be positive, got {value!r}")


def read_url(
    data: Mapping[str, Any],
    env: Mapping[str, str],
    section: str,
    schemes: tuple[str, ...],
    *,
    required: bool = True,
) -> str:
    """`{section}.url`, unless `GATEWAY_{SECTION}_URL` overrides it.

    There is no default address: a gateway that quietly used whatever listens on
    127.0.0.1 could record events in, or create its stream on, someone else's server. A
    required URL that is set in neither place stops start-up naming both; an optional
    one is "" (the feature it serves is off).
    """
    var = f"GATEWAY_{section.upper()}_URL"
    url = env.get(var) or read_value(read_table(data, section, ""), "url", f"{section}.", str, "")
    if not url:
        if not required:
            return ""
        raise ConfigError(
            f"{section}.url",
            f"not set: give url under [{section}] in the config file, or {var} in the environment",
        )
    if url.split("://", 1)[0] not in schemes or "://" not in url:
        # Name the key that held the bad value; never echo it, a URL may carry a password.
        raise ConfigError(
            var if env.get(var) else f"{section}.url", f"must be a {'/'.join(schemes)}:// URL"
        )
    return str(url)


def read_database_url(data: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """`database.url` (or `GATEWAY_DATABASE_URL`), its host list read as the pool reads it.

    A list of hosts (`postgresql://h1:5432,h2:5432/db`, or `PGHOST=h1,h2` under a URL that
    names none) is checked here rather than at the first connection, and so is its
    `target_session_attrs`: every process writes, so one that would settle on a read-only
    server is refused. So is a `service=` that would take the hosts from a service file.
    """
    url = read_url(data, env, "database", ("postgresql", "postgres"))
    key = "GATEWAY_DATABASE_URL" if env.get("GATEWAY_DATABASE_URL") else "database.url"
    try:
        hosts = split_hosts(url, env)
    except HostListInvalid as exc:  # its message names no credentials
        raise ConfigError(key, str(exc)) from None
    if hosts.target_session_attrs not in WRITABLE_ATTRS:
        writable = ", ".join(sorted(a.value for a in WRITABLE_ATTRS))
        raise ConfigError(
            key,
            f"target_session_attrs={hosts.target_session_attrs} connects to servers that "
            f"refuse writes, and every gateway process writes: use one of {writable}",
        )
    return url


def read_section(
    cls: type,
    data: Mapping[str, Any],
    section: str,
    skip: tuple[str, ...] = (),
    zero_ok: frozenset[str] = frozenset(),
) -> Any:
    """Read one table into its settings class, rejecting unknown keys and bad values.

    Numbers must be positive, except the names in `zero_ok`, where zero turns something off.
    """
    table = read_table(data, section, "")
    defaults = cls()
    values: dict[str, Any] = {}
    refuse_unknown(table, f"{section}.", {*vars(defaults), *skip})
    for name, default in vars(defaults).items():
        if name in skip:
            continue
        kind = type(default)
        value = read_value(table, name, f"{section}.", kind, default)
        if kind in (int, float) and not (name in zero_ok and value == 0):
            require_positive(value, f"{section}.{name}")
        values[name] = value
    return cls(**values)
