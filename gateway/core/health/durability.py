"""Whether a failover can lose what the gateway acknowledged: decided from what
PostgreSQL reports, with no I/O.

A 2xx promises the event is durable, and the sender then forgets it. On one server that
means its disk; with a standby it means more only when the commit waited for the
standby: `synchronous_commit` in `on`, `remote_write` or `remote_apply`, and
`synchronous_standby_names` naming standbys of which enough are streaming. Otherwise the
primary acknowledges commits the standby may not have, and promoting the standby loses
them.

Only a physical standby is a copy a failover can promote. A logical replication
subscriber (a change-data-capture consumer) is a walsender too, and `*` or its name in
`synchronous_standby_names` makes it synchronous: commits then wait for it, but a
physical standby may still lack them. A rule met by subscribers alone is at risk.

Inputs (`decide`): the session's `synchronous_commit`, `synchronous_standby_names` as
configured, and the rows of `pg_stat_replication` (`application_name`, `state`,
`sync_state`, and whether the walsender is logical). A role without `pg_read_all_stats`
(which `pg_monitor` includes) sees those rows with their fields NULL: the state is then
`unknown`, never a guess. Nothing here raises on what the server says: a value it
cannot read becomes `unknown` with a reason.

A reading carries a fixed code (`DurabilityReason`), which is all `/readyz` shows, and a
line for the log and the start-up refusal. The line gives the standby rule's shape (its
method, how many it requires, how many names), never the names: they can be many, and
they name the standbys' hosts.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.core.failures.excerpt import excerpt


class DurabilityState(enum.StrEnum):
    """What a failover would do to acknowledged events; stored in logs and metric labels."""

    #: Every commit waits for enough synchronous standbys, and they are streaming.
    SYNCHRONOUS = "synchronous"
    #: A commit can be acknowledged before any physical standby has it: a failover can
    #: lose it.
    AT_RISK = "at_risk"
    #: Standbys are required but too few stream: commits wait (nothing is acknowledged,
    #: nothing is lost; ingestion answers 503 until one is back).
    WAITING_FOR_STANDBY = "waiting_for_standby"
    #: The gateway cannot tell (hidden fields, unreadable settings, no answer).
    UNKNOWN = "unknown"


class DurabilityReason(enum.StrEnum):
    """Why a reading has its state, as `/readyz` says it: a fixed code, never the text of
    the server's settings."""

    #: Enough synchronous standbys stream for `synchronous_standby_names` (synchronous).
    STANDBYS_STREAMING = "standbys_streaming"
    #: `synchronous_commit` is `off` or `local`: commits never wait (at_risk).
    COMMIT_DOES_NOT_WAIT = "commit_does_not_wait"
    #: `synchronous_standby_names` is empty (at_risk).
    NO_STANDBY_CONFIGURED = "no_standby_configured"
    #: Logical replication subscribers alone meet the rule (at_risk).
    MET_BY_SUBSCRIBERS = "met_by_subscribers"
    #: Fewer synchronous standbys stream than the rule requires (waiting_for_standby).
    TOO_FEW_STREAMING = "too_few_streaming"
    #: `synchronous_commit` reads a value the gateway does not know (unknown).
    COMMIT_SETTING_UNKNOWN = "commit_setting_unknown"
    #: `synchronous_standby_names` does not follow PostgreSQL's grammar (unknown).
    STANDBY_NAMES_UNREADABLE = "standby_names_unreadable"
    #: `pg_stat_replication` hides its fields from the gateway's role (unknown).
    STANDBYS_HIDDEN = "standbys_hidden"
    #: The database did not answer the reading (unknown).
    NO_ANSWER = "no_answer"
    #: The durability query failed: refused by the server, or a bug (unknown).
    QUERY_FAILED = "query_failed"
    #: Nothing read yet, or nothing reads it in this process (unknown).
    NOT_READ = "not_read"


#: The most characters of `synchronous_standby_names` an error about its grammar quotes.
_QUOTED_CHARS = 20
#: `synchronous_commit` values whose commits wait for the synchronous standbys, and those
#: that do not. The aliases are PostgreSQL's own (`SHOW` prints the canonical names).
_WAITS = frozenset({"on", "remote_write", "remote_apply", "true", "yes", "1"})
_DOES_NOT_WAIT = {"off": "off", "false": "off", "no": "off", "0": "off", "local": "local"}
#: The `sync_state` of a standby a commit waits for: `sync` (FIRST), `quorum` (ANY).
_COUNTED_SYNC_STATES = frozenset({"sync", "quorum"})


@dataclass(frozen=True)
class StandbyRow:
    """One row of `pg_stat_replication`; a field is None where the role may not read it.
    `logical`: the walsender streams to a logical replication subscriber, not a standby."""

    application_name: str | None
    state: str | None
    sync_state: str | None
    logical: bool = False


@dataclass(frozen=True)
class StandbyRule:
    """`synchronous_standby_names`, parsed: how many of which standbys a commit waits for."""

    method: str  # "FIRST" (priority) or "ANY" (quorum)
    required: int
    names: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.method} {self.required} ({', '.join(self.names)})"

    def shape(self) -> str:
        """The rule without its names, for a log line: `FIRST 1 of 2 names`, `ANY 2 of
        any` (for `*`). The names can be long and name hosts; the count says enough."""
        if self.names == ("*",):
            return f"{self.method} {self.required} of any"
        count = len(self.names)
        return f"{self.method} {self.required} of {count} name{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class Durability:
    """One reading: the state, why as a code and in a line (for the log), and how many
    synchronous standbys stream."""

    state: DurabilityState
    code: DurabilityReason
    reason: str
    synchronous_standbys: int = 0

    def to_json(self) -> dict[str, object]:
        """`/readyz`'s `durability`: the state and the code, never the line (which
        describes the server's settings, and `/readyz` may be public)."""
        return {
            "state": str(self.state),
            "synchronous_standbys": self.synchronous_standbys,
            "reason": str(self.code),
        }


class StandbyNamesError(ValueError):
    """`synchronous_standby_names` does not follow PostgreSQL's grammar."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>"(?:[^"]|"")*")
      | (?P<number>[0-9]+)
      | (?P<name>[A-Za-z_\x80-\uffff][A-Za-z_$0-9\x80-\uffff]*|\*)
      | (?P<punct>[(),])
    )""",
    re.VERBOSE,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token; a keyword is any spelling of FIRST or ANY, unquoted."""
    found: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise StandbyNamesError(f"unexpected {text[pos:].strip()[:_QUOTED_CHARS]!r}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "quoted":
            value = value[1:-1].replace('""', '"')
        elif kind == "name" and value.upper() in ("FIRST", "ANY"):
            kind, value = "keyword", value.upper()
        found.append((kind, value))
        pos = match.end()
    return found


def parse_standby_names(text: str) -> StandbyRule | None:
    """PostgreSQL's grammar: `[FIRST] n (a, b)`, `ANY n (a, b)`, or a plain list `a, b`
    (priority order, one required); `*` matches any standby. None when it is empty (no
    synchronous standby); `StandbyNamesError` when it cannot be read."""
    tokens = _tokens(text)
    if not tokens:
        return None
    method, required = "FIRST", 1
    if tokens[0][0] == "keyword" or (len(tokens) > 1 and tokens[1] == ("punct", "(")):
        if tokens[0][0] == "keyword":
            method = tokens.pop(0)[1]
        if not tokens or tokens[0][0] != "number":
            raise StandbyNamesError("a number of standbys must come before the names' '('")
        required = int(tokens.pop(0)[1])
        if required < 1:
            raise StandbyNamesError("the number of synchronous standbys must be at least 1")
        if tokens[:1] != [("punct", "(")] or tokens[-1:] != [("punct", ")")]:
            raise StandbyNamesError("the standby names must follow in parentheses")
        tokens = tokens[1:-1]
    names: list[str] = []
    for i, (kind, value) in enumerate(tokens):
        if i % 2 == 1:
            if (kind, value) != ("punct", ","):
                raise StandbyNamesError(f"expected a comma, got {excerpt(value, _QUOTED_CHARS)}")
        elif kind in ("name", "quoted", "number"):
            names.append(value)
        else:
            raise StandbyNamesError(f"expected a standby name, got {excerpt(value, _QUOTED_CHARS)}")
    if not names or len(tokens) % 2 == 0:
        raise StandbyNamesError("a standby name is missing")
    return StandbyRule(method, required, tuple(names))


def _standbys(n: int) -> str:
    return f"{n} synchronous standby" if n == 1 else f"{n} synchronous standbys"


def decide(
    synchronous_commit: str | None,
    standby_names: str | None,
    rows: Sequence[StandbyRow],
    role: str = "",
) -> Durability:
    """The durability of commits made with these settings, with these standbys connected.

    Checked in this order: a `synchronous_commit` that does not wait (at risk whatever
    the standbys), no standby configured (at risk), the names unreadable (unknown), the
    replication rows hidden (unknown), then how many synchronous walsenders stream: too
    few for the rule and commits wait; enough of them logical subscribers to meet it
    alone and a commit can be acknowledged without a physical standby having it.
    """
    commit = (synchronous_commit or "").strip().lower()
    try:
        rule = parse_standby_names(standby_names or "")
        names_problem = ""
    except StandbyNamesError as exc:
        rule, names_problem = None, str(exc)
    lose = "a failover can lose events the gateway acknowledged"
    if commit in _DOES_NOT_WAIT:
        alone = " and no synchronous standby is configured" if rule is None else ""
        return Durability(
            DurabilityState.AT_RISK,
            DurabilityReason.COMMIT_DOES_NOT_WAIT,
            f"synchronous_commit is {_DOES_NOT_WAIT[commit]}{alone}: commits are acknowledged "
            f"before a standby has them, so {lose}",
        )
    if commit not in _WAITS:
        shown = repr(commit) if commit else "nothing"
        return Durability(
            DurabilityState.UNKNOWN,
            DurabilityReason.COMMIT_SETTING_UNKNOWN,
            f"synchronous_commit reads {shown}, not a value the gateway knows",
        )
    if names_problem:
        return Durability(
            DurabilityState.UNKNOWN,
            DurabilityReason.STANDBY_NAMES_UNREADABLE,
            f"synchronous_standby_names cannot be read: {names_problem}",
        )
    if rule is None:
        return Durability(
            DurabilityState.AT_RISK,
            DurabilityReason.NO_STANDBY_CONFIGURED,
            f"no synchronous standby is configured (synchronous_standby_names is empty), so {lose}",
        )
    if any(r.state is None or r.sync_state is None for r in rows):
        who = f"the gateway's role {role}" if role else "the gateway's database role"
        return Durability(
            DurabilityState.UNKNOWN,
            DurabilityReason.STANDBYS_HIDDEN,
            f"pg_stat_replication hides its fields from {who}: grant it pg_monitor "
            "(or pg_read_all_stats) so the gateway can see its standbys",
        )
    counted = [r for r in rows if r.state == "streaming" and r.sync_state in _COUNTED_SYNC_STATES]
    physical = sum(1 for r in counted if not r.logical)
    logical = len(counted) - physical
    if len(counted) < rule.required:
        among = f" ({_subscribers(logical)} among them)" if logical else ""
        return Durability(
            DurabilityState.WAITING_FOR_STANDBY,
            DurabilityReason.TOO_FEW_STREAMING,
            f"synchronous_standby_names ({rule.shape()}) needs {_standbys(rule.required)}, "
            f"{len(counted)} streaming{among}: commits wait for one to connect",
            physical,
        )
    # A commit waits for `required` of the counted walsenders (FIRST: the `sync` ones,
    # exactly `required`; ANY: whichever `required` answer first). With fewer logical
    # ones than that, each such set holds a physical standby.
    if logical >= rule.required:
        return Durability(
            DurabilityState.AT_RISK,
            DurabilityReason.MET_BY_SUBSCRIBERS,
            f"synchronous_standby_names ({rule.shape()}) is met by logical replication "
            f"subscribers ({logical} streaming as synchronous), which a failover cannot "
            f"promote: a commit can be acknowledged before any physical standby has it, "
            f"so {lose}",
            physical,
        )
    also = f" (and {_subscribers(logical)})" if logical else ""
    return Durability(
        DurabilityState.SYNCHRONOUS,
        DurabilityReason.STANDBYS_STREAMING,
        f"{_standbys(physical)} streaming{also} for synchronous_standby_names "
        f"({rule.shape()}), synchronous_commit = {commit}",
        physical,
    )


def _subscribers(n: int) -> str:
    s = "" if n == 1 else "s"
    return f"{n} logical replication subscriber{s}"


def unreachable(interval_s: float) -> Durability:
    """What is known while the database does not answer: nothing."""
    return Durability(
        DurabilityState.UNKNOWN,
        DurabilityReason.NO_ANSWER,
        f"the database did not answer; read again every {interval_s:g} s",
    )


@dataclass(frozen=True)
class Announcement:
    """A log line a reading calls for: its level (`warning`, `info`) and message."""

    level: str
    message: str


def announce(previous: DurabilityState | None, reading: Durability) -> Announcement | None:
    """The line to log for `reading`, given the state last read (None: nothing read yet).

    Once per change of state: a warning on entering any state other than synchronous
    (the first reading included), info on entering synchronous. A reading in the same
    state says nothing, so a database left at risk is announced once, not every 30 s.
    """
    if reading.state == previous:
        return None
    message = f"database durability: {reading.state}: {reading.reason}"
    if reading.state is DurabilityState.SYNCHRONOUS:
        return Announcement("info", message)
    return Announcement("warning", message)
