"""The durability decision: what PostgreSQL reports, read as the risk a failover carries
for acknowledged events; and the grammar of `synchronous_standby_names`, which the
decision never lets raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.core.health.durability import (
    Announcement,
    Durability,
    DurabilityReason,
    DurabilityState,
    StandbyNamesError,
    StandbyRow,
    StandbyRule,
    announce,
    decide,
    parse_standby_names,
    unreachable,
)

ROOT = Path(__file__).resolve().parents[2]
S = DurabilityState
R = DurabilityReason
SYNC = StandbyRow("standby1", "streaming", "sync")
QUORUM = StandbyRow("standby1", "streaming", "quorum")
QUORUM_2 = StandbyRow("standby2", "streaming", "quorum")
POTENTIAL = StandbyRow("standby2", "streaming", "potential")
ASYNC = StandbyRow("standby1", "streaming", "async")
CATCHING_UP = StandbyRow("standby1", "catchup", "sync")
HIDDEN = StandbyRow(None, None, None)
# Logical replication subscribers: synchronous to PostgreSQL, no copy a failover promotes.
SUBSCRIBER = StandbyRow("cdc", "streaming", "sync", logical=True)
SUBSCRIBER_QUORUM = StandbyRow("cdc", "streaming", "quorum", logical=True)
SUBSCRIBER_QUORUM_2 = StandbyRow("cdc2", "streaming", "quorum", logical=True)
SUBSCRIBER_HIDDEN = StandbyRow("cdc", None, None, logical=True)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        # A plain list: priority order, one standby required; `*` is any standby.
        ("standby1", StandbyRule("FIRST", 1, ("standby1",))),
        ("a, b", StandbyRule("FIRST", 1, ("a", "b"))),
        ("*", StandbyRule("FIRST", 1, ("*",))),
        # `n (...)` is FIRST n; the keywords in any case, any whitespace.
        ("2 (a, b, c)", StandbyRule("FIRST", 2, ("a", "b", "c"))),
        ("FIRST 1 (a, b)", StandbyRule("FIRST", 1, ("a", "b"))),
        ("first 2(a,b)", StandbyRule("FIRST", 2, ("a", "b"))),
        ("ANY 2 (a, b, c)", StandbyRule("ANY", 2, ("a", "b", "c"))),
        ("  aNy\t1\n( a ,\tb )  ", StandbyRule("ANY", 1, ("a", "b"))),
        # Quoted names keep their case and may hold anything, "" being a quote; a name
        # that only starts like a keyword is a name; a number alone is a name.
        ('"Standby-1", "a ""b"""', StandbyRule("FIRST", 1, ("Standby-1", 'a "b"'))),
        ('ANY 1 ("first", "any")', StandbyRule("ANY", 1, ("first", "any"))),
        ("anyone, firstly", StandbyRule("FIRST", 1, ("anyone", "firstly"))),
        ("s_1$x, ñandú", StandbyRule("FIRST", 1, ("s_1$x", "ñandú"))),
        ("1", StandbyRule("FIRST", 1, ("1",))),
    ],
)
def test_the_standby_names_grammar(text: str, rule: StandbyRule) -> None:
    """Every form PostgreSQL accepts reads as the rule it enforces."""
    assert parse_standby_names(text) == rule


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_standby_names_mean_no_synchronous_standby(text: str) -> None:
    assert parse_standby_names(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "FIRST (a)",  # no number
        "ANY",
        "FIRST 0 (a)",  # at least one
        "2 a, b",  # no parentheses
        "FIRST 1 (a, b",
        "FIRST 1 ()",
        "a, , b",
        "a,",
        "a b",
        "a (b)",  # a name where the number belongs
        "FIRST 1 (a, (b))",
        '"unterminated',
        "a; b",
        "first, b",  # a keyword is not a name unless quoted
    ],
)
def test_text_outside_the_grammar_is_refused(text: str) -> None:
    with pytest.raises(StandbyNamesError):
        parse_standby_names(text)


@pytest.mark.parametrize(
    ("commit", "names", "rows", "state", "standbys", "says"),
    [
        # Commits that never wait for a standby: at risk, whatever is connected.
        ("off", "standby1", [SYNC], S.AT_RISK, 0, "synchronous_commit is off"),
        ("local", "standby1", [SYNC], S.AT_RISK, 0, "synchronous_commit is local"),
        ("false", "", [], S.AT_RISK, 0, "is off and no synchronous standby is configured"),
        ("OFF", "not ( parsable", [], S.AT_RISK, 0, "synchronous_commit is off"),
        # No synchronous standby configured: at risk, even with an async standby streaming.
        ("on", "", [], S.AT_RISK, 0, "synchronous_standby_names is empty"),
        ("on", "  ", [ASYNC], S.AT_RISK, 0, "a failover can lose events"),
        # Configured, enough streaming as sync or quorum: synchronous.
        ("on", "standby1", [SYNC], S.SYNCHRONOUS, 1, "1 synchronous standby streaming"),
        ("remote_apply", "FIRST 1 (standby1, standby2)", [SYNC, POTENTIAL], S.SYNCHRONOUS, 1,
         "synchronous_commit = remote_apply"),
        ("remote_write", "ANY 2 (standby1, standby2)", [QUORUM, QUORUM_2], S.SYNCHRONOUS, 2,
         "2 synchronous standbys streaming"),
        ("on", "*", [SYNC], S.SYNCHRONOUS, 1, "synchronous_standby_names (FIRST 1 of any)"),
        # Configured, too few streaming: commits wait.
        ("on", "standby1", [], S.WAITING_FOR_STANDBY, 0,
         "needs 1 synchronous standby, 0 streaming"),
        ("on", "ANY 2 (standby1, standby2)", [QUORUM], S.WAITING_FOR_STANDBY, 1, "needs 2"),
        ("on", "standby1", [CATCHING_UP], S.WAITING_FOR_STANDBY, 0, "commits wait"),
        ("on", "standby1", [ASYNC, POTENTIAL], S.WAITING_FOR_STANDBY, 0, "0 streaming"),
        ("on", "FIRST 2 (*)", [SUBSCRIBER], S.WAITING_FOR_STANDBY, 0,
         "needs 2 synchronous standbys, 1 streaming (1 logical replication subscriber among"),
        # The rule met by logical subscribers alone: commits are acknowledged once they
        # have them, with no physical standby in the wait. At risk, with or without a
        # physical standby connected.
        ("on", "*", [SUBSCRIBER], S.AT_RISK, 0,
         "is met by logical replication subscribers (1 streaming as synchronous), which a "
         "failover cannot promote"),
        ("on", "*", [SUBSCRIBER, POTENTIAL], S.AT_RISK, 0, "before any physical standby"),
        ("on", "*", [POTENTIAL, SUBSCRIBER], S.AT_RISK, 0, "a failover can lose events"),
        ("on", "cdc, standby1", [SUBSCRIBER, ASYNC], S.AT_RISK, 0, "(FIRST 1 of 2 names)"),
        # ANY 1: whichever answers first acknowledges, the subscriber included.
        ("on", "ANY 1 (*)", [QUORUM, SUBSCRIBER_QUORUM], S.AT_RISK, 1, "logical replication"),
        ("on", "ANY 2 (*)", [QUORUM, SUBSCRIBER_QUORUM, SUBSCRIBER_QUORUM_2], S.AT_RISK, 1,
         "(2 streaming as synchronous)"),
        # Every set of walsenders a commit waits for holds a physical standby: synchronous,
        # counting the physical ones.
        ("on", "FIRST 2 (standby1, cdc)", [SYNC, SUBSCRIBER], S.SYNCHRONOUS, 1,
         "1 synchronous standby streaming (and 1 logical replication subscriber)"),
        ("on", "ANY 2 (*)", [QUORUM, QUORUM_2, SUBSCRIBER_QUORUM], S.SYNCHRONOUS, 2,
         "2 synchronous standbys streaming (and 1 logical"),
        ("on", "standby1", [SYNC, StandbyRow("cdc", "streaming", "async", logical=True)],
         S.SYNCHRONOUS, 1, "1 synchronous standby streaming for"),
        # What cannot be read is unknown, with what to do about it.
        ("on", "standby1", [HIDDEN], S.UNKNOWN, 0, "grant it pg_monitor (or pg_read_all_stats)"),
        ("on", "*", [SYNC, SUBSCRIBER_HIDDEN], S.UNKNOWN, 0, "grant it pg_monitor"),
        ("on", "FIRST 1 (a", [SYNC], S.UNKNOWN, 0, "synchronous_standby_names cannot be read"),
        ("sometimes", "standby1", [SYNC], S.UNKNOWN, 0, "synchronous_commit reads 'sometimes'"),
        (None, "standby1", [SYNC], S.UNKNOWN, 0, "synchronous_commit reads nothing"),
    ],
)  # fmt: skip
def test_each_reading_decides_one_state(
    commit: str | None,
    names: str,
    rows: list[StandbyRow],
    state: DurabilityState,
    standbys: int,
    says: str,
) -> None:
    """The state, the count of streaming synchronous standbys, and a reason saying why."""
    got = decide(commit, names, rows)
    assert (got.state, got.synchronous_standbys) == (state, standbys), got
    assert says in got.reason, got.reason


def test_the_hidden_fields_reason_names_the_role() -> None:
    """The operator is told which role to grant pg_monitor to."""
    got = decide("on", "standby1", [HIDDEN], role="gateway_app")
    assert "the gateway's role gateway_app: grant it pg_monitor" in got.reason


@pytest.mark.parametrize(
    "names",
    ['"', "(", ")", ",", "FIRST", "ANY 1", "1 (", "\x00", "a" * 10_000 + " (", "ANY -1 (a)"],
)
def test_bad_names_never_raise_to_the_caller(names: str) -> None:
    """Whatever the setting holds, the caller gets a reading, here unknown."""
    got = decide("on", names, [SYNC])
    assert got.state is S.UNKNOWN
    assert got.reason.startswith("synchronous_standby_names cannot be read")


def test_a_reading_is_reported_as_json() -> None:
    """The shape of `/readyz`'s `durability`: the reason is its code, never its line."""
    got = Durability(S.AT_RISK, R.NO_STANDBY_CONFIGURED, "why", 0).to_json()
    assert got == {"state": "at_risk", "synchronous_standbys": 0, "reason": "no_standby_configured"}


def test_an_unreachable_database_is_unknown_and_says_when_it_is_read_again() -> None:
    got = unreachable(30.0)
    assert (got.state, got.code) == (S.UNKNOWN, R.NO_ANSWER)
    assert "did not answer; read again every 30 s" in got.reason


AT_RISK = Durability(S.AT_RISK, R.NO_STANDBY_CONFIGURED, "no standby")
WAITING = Durability(S.WAITING_FOR_STANDBY, R.TOO_FEW_STREAMING, "0 streaming")
SYNCHRONOUS = Durability(S.SYNCHRONOUS, R.STANDBYS_STREAMING, "1 streaming", 1)


@pytest.mark.parametrize(
    ("previous", "reading", "expected"),
    [
        # The first reading: a warning unless synchronous (which is said at info).
        (None, AT_RISK, Announcement("warning", "database durability: at_risk: no standby")),
        (None, SYNCHRONOUS, Announcement("info", "database durability: synchronous: 1 streaming")),
        # The same state again says nothing.
        (S.AT_RISK, AT_RISK, None),
        (S.SYNCHRONOUS, SYNCHRONOUS, None),
        # A change: a warning into any other state, info back into synchronous.
        (S.SYNCHRONOUS, WAITING, Announcement("warning", "database durability: "
                                              "waiting_for_standby: 0 streaming")),
        (S.WAITING_FOR_STANDBY, AT_RISK, Announcement("warning", "database durability: "
                                                      "at_risk: no standby")),
        (S.AT_RISK, SYNCHRONOUS, Announcement("info", "database durability: synchronous: "
                                              "1 streaming")),
    ],
)  # fmt: skip
def test_a_line_is_logged_once_per_change_of_state(
    previous: DurabilityState | None, reading: Durability, expected: Announcement | None
) -> None:
    assert announce(previous, reading) == expected


def test_the_http_documents_states_are_the_enums() -> None:
    """`/readyz`'s documented `durability.state` values are exactly the states."""
    doc = json.loads((ROOT / "gateway" / "ingest" / "openapi.json").read_text())
    documented = doc["components"]["schemas"]["Durability"]["properties"]["state"]["enum"]
    assert documented == [str(s) for s in DurabilityState]


def test_the_http_documents_reason_codes_are_the_enum() -> None:
    """`/readyz`'s documented `durability.reason` values are exactly the codes."""
    doc = json.loads((ROOT / "gateway" / "ingest" / "openapi.json").read_text())
    documented = doc["components"]["schemas"]["Durability"]["properties"]["reason"]["enum"]
    assert documented == [str(r) for r in DurabilityReason]


#: Standby names as a deployment writes them: the standbys' host names.
NAMED = '"pg-standby-a.dc1.internal", "pg-standby-b.dc2.internal", "pg-standby-c.dc3.internal"'
NAMES = ("pg-standby-a", "pg-standby-b", "pg-standby-c")


@pytest.mark.parametrize(
    ("commit", "names", "rows", "code", "shape"),
    [
        ("on", f"ANY 2 ({NAMED})", [QUORUM, QUORUM_2], R.STANDBYS_STREAMING, "ANY 2 of 3 names"),
        ("on", f"FIRST 2 ({NAMED})", [SYNC], R.TOO_FEW_STREAMING, "FIRST 2 of 3 names"),
        ("on", NAMED, [SUBSCRIBER], R.MET_BY_SUBSCRIBERS, "FIRST 1 of 3 names"),
        ("on", "*", [SYNC], R.STANDBYS_STREAMING, "FIRST 1 of any"),
        ("on", "standby1", [SYNC], R.STANDBYS_STREAMING, "FIRST 1 of 1 name"),
        ("off", NAMED, [SYNC], R.COMMIT_DOES_NOT_WAIT, ""),
        ("on", "", [], R.NO_STANDBY_CONFIGURED, ""),
        ("on", NAMED, [HIDDEN], R.STANDBYS_HIDDEN, ""),
        ("on", f"{NAMED} (", [SYNC], R.STANDBY_NAMES_UNREADABLE, ""),
        ("sometimes", NAMED, [SYNC], R.COMMIT_SETTING_UNKNOWN, ""),
    ],
)  # fmt: skip
def test_a_reading_has_a_code_and_describes_the_rule_by_its_shape(
    commit: str, names: str, rows: list[StandbyRow], code: DurabilityReason, shape: str
) -> None:
    """Each decision has its fixed code (what `/readyz` shows); its line (for the log)
    gives the rule's method, count and number of names, never a standby's name."""
    got = decide(commit, names, rows)
    assert got.code is code
    assert shape in got.reason, got.reason
    assert not any(name in got.reason for name in NAMES), got.reason
    assert not any(name in str(got.to_json()) for name in NAMES)


@pytest.mark.parametrize("names", ['a "' + "b" * 10_000 + '"', '"' + "b" * 10_000 + '" ,, c'])
def test_an_unreadable_rule_is_quoted_at_most_in_part(names: str) -> None:
    """A grammar error quotes a bounded excerpt of the offending token."""
    got = decide("on", names, [SYNC])
    assert got.code is R.STANDBY_NAMES_UNREADABLE
    assert len(got.reason) < 150, got.reason
