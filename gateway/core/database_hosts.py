"""The hosts of a PostgreSQL URL, and the order to try them in.

`postgresql://user@h1:5432,h2:5433/db?target_session_attrs=read-write` names a primary
and its standby; after a failover the standby is the primary. asyncpg accepts such a
URL itself, but its connect `timeout` is one budget around its whole loop over the
hosts: when the first host is black-holed (the machine is gone and SYNs are dropped, or
a peer accepts and never answers), every connect spends the whole budget there and never
reaches the second host. So the gateway splits the URL here and connects host by host,
each with its own timeout, the next host starting when the one before has failed or gone
unanswered for a stagger delay (`gateway.adapters.postgres.hosts`), and the whole walk
within one budget (`walk_budget_s`). A list holds at most `MAX_HOSTS` hosts.

The split follows asyncpg's reading of the URL form (`_parse_connect_dsn_and_args` in
asyncpg 0.32), so each host gets the address asyncpg itself would have used:

- the hosts are the URL's `host[:port]` list, comma-separated; an IPv6 address is
  bracketed (`[::1]:5432`); a host without a port takes the default port;
- only when the URL names no host, a `?host=` list (with `?port=`, one port or one per
  host) names them; a host starting with `/` is a Unix socket directory;
- only when neither does, `PGHOST` names them (a list too, with `?port=` as above): read
  here so that `PGHOST=h1,h2` gets the per-host timeouts, as the URL's own list does;
- `?service=` with no host in the URL is refused: the hosts would come from a connection
  service file, which is not read here, and a list there would be walked by asyncpg
  within one connect timeout (with the URL naming the hosts, asyncpg ignores the file's);
- the default port is `PGPORT` (one port, or one per host), else 5432;
- `target_session_attrs` comes from the URL, else `PGTARGETSESSIONATTRS`.

Pure: the environment comes in as a mapping; nothing here connects.
"""

from __future__ import annotations

import enum
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_PORT = 5432
#: The most hosts one URL (or `?host=`, or `PGHOST`) may list. A primary and its
#: standbys are a handful; every host is a connection attempt (and a socket) on each
#: new connection, so a list is refused at start-up rather than walked at any length.
MAX_HOSTS = 16
_IPV6 = re.compile(r"\[([^\]]+)\](?::([0-9]*))?")


class HostListInvalid(ValueError):
    """The URL's host list cannot be read; the message quotes no credentials."""


class SessionAttrs(enum.StrEnum):
    """libpq's `target_session_attrs`: which server a connection may settle on."""

    ANY = "any"
    PRIMARY = "primary"
    STANDBY = "standby"
    PREFER_STANDBY = "prefer-standby"
    READ_WRITE = "read-write"
    READ_ONLY = "read-only"


#: The values a gateway process can work with: every process writes (serve inserts,
#: the relay moves its cursor, settle posts transfers, the CLI resolves and replays).
WRITABLE_ATTRS = frozenset({SessionAttrs.ANY, SessionAttrs.PRIMARY, SessionAttrs.READ_WRITE})


@dataclass(frozen=True)
class DatabaseHost:
    """One server of the list: a name or address (IPv6 without brackets), or a Unix
    socket directory, and its port."""

    host: str
    port: int

    def __str__(self) -> str:
        """`host:port` as a URL writes it (IPv6 bracketed), for logs and errors."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class DatabaseHosts:
    """What a URL says about where to connect: its hosts, in the URL's order, and the
    session attribute a connection must have."""

    hosts: tuple[DatabaseHost, ...]
    target_session_attrs: SessionAttrs

    @property
    def is_multi_host(self) -> bool:
        return len(self.hosts) > 1

    def describe(self) -> str:
        """`h1:p1, h2:p2`: the list as errors and logs show it (never the credentials)."""
        return ", ".join(str(h) for h in self.hosts)


def split_hosts(url: str, env: Mapping[str, str] | None = None) -> DatabaseHosts:
    """Read the hosts and the session attribute of a `postgresql://` URL.

    No host in the URL or in `PGHOST` gives an empty list: asyncpg then tries its local
    defaults (the usual socket directories, then localhost), which the gateway leaves to it.
    """
    env = {} if env is None else env
    try:
        parsed = urllib.parse.urlparse(url)
        # asyncpg keeps the last value of a repeated key, and so do we.
        query = {
            k: v[-1]
            for k, v in urllib.parse.parse_qs(parsed.query, strict_parsing=True).items()
        } if parsed.query else {}  # fmt: skip
    except ValueError as exc:
        # urllib's message may quote the URL, and with it a password: never pass it on.
        raise HostListInvalid("the URL cannot be parsed (check brackets and the query)") from exc
    # asyncpg splits the user information off at the first `@`, as done here.
    _, at, hostspec = parsed.netloc.partition("@")
    hostspec = hostspec if at else parsed.netloc
    if "@" in hostspec:
        # A raw `@` in the password: asyncpg would take the rest of the password for a
        # host name (and errors would show it). Say so without quoting any of it.
        raise HostListInvalid("the URL has more than one '@': write '@' in a password as %40")
    if hostspec:
        hosts = _parse_hostlist(hostspec, None, env, unquote=True, source="the URL")
    elif query.get("service"):
        raise HostListInvalid(
            "service= takes the hosts from a connection service file, where a list of hosts "
            "would share one connect timeout and a silent first host would stop failover: "
            "name the hosts in the URL instead (postgresql://user@h1:5432,h2:5432/db)"
        )
    else:
        # `?port=` serves a `?host=` list, and PGHOST's too, as in asyncpg.
        ports = _port_list(query["port"], "?port=") if query.get("port") else None
        if query.get("host"):
            hosts = _parse_hostlist(query["host"], ports, env, unquote=False, source="?host=")
        elif env.get("PGHOST"):
            hosts = _parse_hostlist(env["PGHOST"], ports, env, unquote=False, source="PGHOST")
        else:
            hosts = ()
    return DatabaseHosts(hosts, _target_session_attrs(query, env, multi_host=len(hosts) > 1))


def _target_session_attrs(
    query: Mapping[str, str], env: Mapping[str, str], *, multi_host: bool
) -> SessionAttrs:
    given = query.get("target_session_attrs") or env.get("PGTARGETSESSIONATTRS")
    if given is None:
        # libpq's default is `any`: with a list of hosts, the first that answers, which
        # after a failover may be the old primary come back as a standby, or a standby
        # listed first, so every write would fail. The gateway writes from every process,
        # so a list of hosts means "the writable one" unless the URL says otherwise.
        return SessionAttrs.READ_WRITE if multi_host else SessionAttrs.ANY
    try:
        return SessionAttrs(given)
    except ValueError:
        choices = ", ".join(a.value for a in SessionAttrs)
        raise HostListInvalid(
            f"target_session_attrs must be one of {choices}, got {given!r}"
        ) from None


def _port_list(spec: str, where: str) -> list[int]:
    return [_port(p, where) for p in spec.split(",")]


def _port(text: str, where: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 < int(text) < 65536:
        # Not echoed: a password misplaced into the port's position would be.
        raise HostListInvalid(f"{where}: a port must be a number from 1 to 65535")
    return int(text)


def _default_ports(count: int, ports: list[int] | None, env: Mapping[str, str]) -> list[int]:
    """One port per host: the given list, else `PGPORT`, else 5432 (one value serves all)."""
    if ports is None:
        pgport = env.get("PGPORT")
        ports = _port_list(pgport, "PGPORT") if pgport else [DEFAULT_PORT]
    if len(ports) == 1:
        return ports * count
    if len(ports) != count:
        raise HostListInvalid(f"{len(ports)} ports given for {count} hosts")
    return ports


def _parse_hostlist(
    spec: str, ports: list[int] | None, env: Mapping[str, str], *, unquote: bool, source: str
) -> tuple[DatabaseHost, ...]:
    specs = spec.split(",")
    if len(specs) > MAX_HOSTS:
        # Counted before anything else is read: the count is the mistake, and no host of
        # it is quoted (they may be many, and long).
        raise HostListInvalid(f"{source} lists {len(specs)} hosts; at most {MAX_HOSTS} are allowed")
    defaults = _default_ports(len(specs), ports, env)
    hosts = []
    for position, (one, default_port) in enumerate(zip(specs, defaults, strict=True), start=1):
        where = f"host {position} of {len(specs)}"
        if not one:
            raise HostListInvalid(f"{where} is empty")
        if one.startswith("["):
            matched = _IPV6.fullmatch(one)
            if matched is None:
                raise HostListInvalid(f"{where}: an IPv6 address is written [address]:port")
            addr, port_text = matched.group(1), matched.group(2) or ""
        else:
            addr, _, port_text = one.partition(":")
            if not addr or ":" in port_text:
                raise HostListInvalid(f"{where}: write an IPv6 address in brackets, [::1]:5432")
        if unquote:
            addr, port_text = urllib.parse.unquote(addr), urllib.parse.unquote(port_text)
        # asyncpg reads the port from the host only when no `?port=` list was given.
        port = _port(port_text, where) if port_text and ports is None else default_port
        hosts.append(DatabaseHost(addr, port))
    return tuple(hosts)


def connect_order(
    hosts: Sequence[DatabaseHost], last_good: DatabaseHost | None
) -> tuple[DatabaseHost, ...]:
    """The host that last gave a usable connection first, then the others in URL order.

    After a failover the new primary is found once, by the connection that walked the
    list; every later connection goes to it first instead of to the old primary. The
    order is also the preference: attempts start in it, one stagger delay apart, and of
    two that are usable at once the earlier one is kept.
    """
    if last_good is None or last_good not in hosts:
        return tuple(hosts)
    return (last_good, *(h for h in hosts if h != last_good))


#: How long one host's connection attempt runs alone before the next host's starts as
#: well ("happy eyeballs" for hosts: RFC 8305's attempt delay, for a whole login). A
#: healthy server completes a login (TCP, start-up, authentication, the session check)
#: in milliseconds on a LAN and in well under this across regions with TLS, so a second
#: attempt starts only when the first host is in trouble; a tenth of the default connect
#: timeout (5 s), it is what a black-holed first host costs instead of that timeout.
HOST_STAGGER_S = 0.5


def stagger_delay_s(connect_timeout_s: float) -> float:
    """The delay before the next host's attempt starts beside one still unanswered.

    `HOST_STAGGER_S`, or a quarter of a connect timeout shorter than 2 s: the next host
    still starts well before the first one's attempt would time out.
    """
    return min(HOST_STAGGER_S, connect_timeout_s / 4)


#: How many connect timeouts one connect may spend across all the hosts of a list.
#: Each host has its own timeout, and the next starts after the stagger delay (at once
#: when one fails), so without a budget a list of silent hosts held a connect for about
#: 0.42 s per host past the first timeout (16 black holes, 5 s timeout: 12.5 s; 100:
#: 42 s). Two timeouts (10 s at the pool's default 5 s) still start every host of a
#: list at the cap (15 x 0.5 s = 7.5 s) with time left for a login (milliseconds on a
#: healthy server), and a black-holed first host still costs only the stagger delay.
WALK_BUDGET_TIMEOUTS = 2


def walk_budget_s(connect_timeout_s: float) -> float:
    """The most one connect spends across all the hosts, however many are silent."""
    return WALK_BUDGET_TIMEOUTS * connect_timeout_s


def attempt_timeout_s(connect_timeout_s: float, budget_left_s: float) -> float | None:
    """The timeout of a host's attempt starting with `budget_left_s` of the walk's
    budget left: its own connect timeout, cut to what is left. None, and no further
    host is started, once less than the stagger delay is left: a login cut that short
    would be reported as the host's failure when it is the budget's."""
    if budget_left_s < stagger_delay_s(connect_timeout_s):
        return None
    return min(connect_timeout_s, budget_left_s)


class HostOutcome(enum.StrEnum):
    """Why a connection attempt to one host did not give a usable connection."""

    REFUSED = "refused"  # nothing listens on the port
    UNREACHABLE = "unreachable"  # no route, unknown name, reset: another OSError
    TIMED_OUT = "timed out"  # no answer within the per-host timeout (black-holed)
    NOT_MATCHING = "not matching"  # connected, but not the target_session_attrs wanted
    UNAVAILABLE = "unavailable"  # a transient server error: starting, shutting down, full
    REJECTED = "rejected"  # a permanent server error: authentication, no such database


def tries_next_host(outcome: HostOutcome) -> bool:
    """Whether the next host is worth trying after this one failed.

    As libpq does: a server that rejects the login or the database says something that
    the next host would say too (they are copies of one another), so it is reported at
    once instead of hidden behind another host's answer.
    """
    return outcome is not HostOutcome.REJECTED


def no_host_message(
    hosts: DatabaseHosts,
    outcomes: Sequence[tuple[DatabaseHost, HostOutcome]],
    untried: Sequence[DatabaseHost] = (),
    budget_s: float = 0.0,
) -> str:
    """The error when every host failed: each host and what it did, and the hosts the
    walk's budget left untried, never credentials."""
    each = ", ".join(f"{host} {outcome.value}" for host, outcome in outcomes)
    message = f"no usable database host (target_session_attrs={hosts.target_session_attrs})"
    if each:
        message = f"{message}: {each}"
    if untried:
        left = ", ".join(str(h) for h in untried)
        message = f"{message}; not tried within the {budget_s:g} s connect budget: {left}"
    return message
