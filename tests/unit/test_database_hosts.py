"""The hosts of a PostgreSQL URL, read as asyncpg reads them, and the order to try them."""

from __future__ import annotations

import os

import pytest
from asyncpg import connect_utils

from gateway.core.database_hosts import (
    MAX_HOSTS,
    DatabaseHost,
    DatabaseHosts,
    HostListInvalid,
    HostOutcome,
    SessionAttrs,
    attempt_timeout_s,
    connect_order,
    no_host_message,
    split_hosts,
    stagger_delay_s,
    tries_next_host,
    walk_budget_s,
)

H = DatabaseHost
A, B, C = H("a", 5432), H("b", 5433), H("c", 5434)


HOST_CASES = [
    # One host, with and without a port, and with credentials in front.
    ("postgresql://db.internal/gw", {}, [H("db.internal", 5432)]),
    ("postgresql://db.internal:6432/gw", {}, [H("db.internal", 6432)]),
    ("postgres://u:secret@db:5433/gw", {}, [H("db", 5433)]),
    # A list: each host its own port, or the default where it gives none.
    ("postgresql://u@h1:5432,h2:5433/gw", {}, [H("h1", 5432), H("h2", 5433)]),
    ("postgresql://h1,h2:7000,h3/gw", {}, [H("h1", 5432), H("h2", 7000), H("h3", 5432)]),
    ("postgresql://h1:,h2/gw", {}, [H("h1", 5432), H("h2", 5432)]),
    # IPv6 in brackets, with or without a port, next to IPv4.
    ("postgresql://[::1]:5433,127.0.0.1/gw", {}, [H("::1", 5433), H("127.0.0.1", 5432)]),
    ("postgresql://[fe80::1%25eth0],[::1]/gw", {}, [H("fe80::1%eth0", 5432), H("::1", 5432)]),
    # Percent-encoding in the host list is decoded, as asyncpg decodes it.
    ("postgresql://%2Frun%2Fpostgresql,h2/gw", {}, [H("/run/postgresql", 5432), H("h2", 5432)]),
    # PGPORT is the default port: one value for every host, or one per host.
    ("postgresql://h1,h2:7000/gw", {"PGPORT": "6000"}, [H("h1", 6000), H("h2", 7000)]),
    ("postgresql://h1,h2/gw", {"PGPORT": "6001,6002"}, [H("h1", 6001), H("h2", 6002)]),
    # With no host in the URL, `?host=` names them, and `?port=` gives their ports
    # (one for all, or one each), overriding any port written next to a host.
    ("postgresql:///gw?host=h1,h2", {}, [H("h1", 5432), H("h2", 5432)]),
    ("postgresql:///gw?host=h1,h2&port=6000", {}, [H("h1", 6000), H("h2", 6000)]),
    ("postgresql:///gw?host=h1,h2&port=6001,6002", {}, [H("h1", 6001), H("h2", 6002)]),
    ("postgresql:///gw?host=h1:9,h2&port=6000", {}, [H("h1", 6000), H("h2", 6000)]),
    ("postgresql:///gw?host=/run/postgresql", {}, [H("/run/postgresql", 5432)]),
    # Hosts in the URL win over `?host=` and `?port=`, as in asyncpg.
    ("postgresql://h1:7000/gw?host=other&port=1", {}, [H("h1", 7000)]),
    # No host in the URL: PGHOST names them, a list too, so it gets a timeout per host;
    # `?port=` gives their ports, else each its own or PGPORT's.
    ("postgresql:///gw", {"PGHOST": "h1,h2"}, [H("h1", 5432), H("h2", 5432)]),
    ("postgresql://u@/gw", {"PGHOST": "h1:6001,h2", "PGPORT": "7"}, [H("h1", 6001), H("h2", 7)]),
    ("postgresql:///gw?port=6000", {"PGHOST": "h1,h2"}, [H("h1", 6000), H("h2", 6000)]),
    ("postgresql:///gw", {"PGHOST": "/run/postgresql"}, [H("/run/postgresql", 5432)]),
    # A host in the URL, or a `?host=` list, wins over PGHOST; so it does over the
    # hosts of a `?service=` file, which asyncpg then ignores.
    ("postgresql://h1/gw", {"PGHOST": "h2,h3"}, [H("h1", 5432)]),
    ("postgresql:///gw?host=h1", {"PGHOST": "h2,h3"}, [H("h1", 5432)]),
    ("postgresql://h1,h2/gw?service=prod", {}, [H("h1", 5432), H("h2", 5432)]),
    # No host at all: asyncpg's own defaults (local sockets, localhost) apply, not ours.
    ("postgresql:///gw", {}, []),
    ("postgresql://u@/gw", {}, []),
]


@pytest.mark.parametrize(("url", "env", "hosts"), HOST_CASES)
def test_hosts_are_read_as_asyncpg_reads_them(
    url: str, env: dict[str, str], hosts: list[DatabaseHost]
) -> None:
    """Each host and its port, in the URL's order."""
    assert split_hosts(url, env).hosts == tuple(hosts)


def asyncpg_addresses(url: str) -> list[tuple[str, int] | str]:
    """The addresses the installed asyncpg would try for `url` (its private parser)."""
    # Private, and absent from the type stubs: pinned here so an asyncpg upgrade that
    # reads URLs differently fails this test instead of connecting elsewhere.
    addrs, _ = connect_utils._parse_connect_dsn_and_args(  # type: ignore[attr-defined]
        dsn=url, host=None, port=None, user="u", password="p", passfile=None,
        database=None, ssl=None, service=None, servicefile=None, direct_tls=None,
        server_settings=None, target_session_attrs=None, krbsrvname=None, gsslib=None,
    )  # fmt: skip
    return list(addrs)


@pytest.mark.parametrize(("url", "env", "hosts"), [c for c in HOST_CASES if c[2]])
def test_the_split_agrees_with_asyncpg(
    monkeypatch: pytest.MonkeyPatch, url: str, env: dict[str, str], hosts: list[DatabaseHost]
) -> None:
    """Each host gets the address asyncpg itself would have used for the whole URL."""
    for name in ("PGHOST", "PGPORT", "PGTARGETSESSIONATTRS", "PGSERVICE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ours = [
        os.path.join(h.host, f".s.PGSQL.{h.port}") if h.host.startswith("/") else (h.host, h.port)
        for h in split_hosts(url, env).hosts
    ]
    assert ours == asyncpg_addresses(url)


@pytest.mark.parametrize(
    ("url", "env", "attrs"),
    [
        # One host: libpq's default, `any`.
        ("postgresql://h1/gw", {}, SessionAttrs.ANY),
        # A list: the writable one, unless the URL or the environment says otherwise.
        ("postgresql://h1,h2/gw", {}, SessionAttrs.READ_WRITE),
        ("postgresql:///gw?host=h1,h2", {}, SessionAttrs.READ_WRITE),
        ("postgresql:///gw", {"PGHOST": "h1,h2"}, SessionAttrs.READ_WRITE),
        ("postgresql:///gw", {"PGHOST": "h1"}, SessionAttrs.ANY),
        ("postgresql://h1,h2/gw?target_session_attrs=any", {}, SessionAttrs.ANY),
        ("postgresql://h1,h2/gw?target_session_attrs=primary", {}, SessionAttrs.PRIMARY),
        ("postgresql://h1/gw?target_session_attrs=read-write", {}, SessionAttrs.READ_WRITE),
        ("postgresql://h1,h2/gw", {"PGTARGETSESSIONATTRS": "primary"}, SessionAttrs.PRIMARY),
        # The URL wins over the environment; a repeated key keeps its last value.
        (
            "postgresql://h1,h2/gw?target_session_attrs=any",
            {"PGTARGETSESSIONATTRS": "primary"},
            SessionAttrs.ANY,
        ),
        (
            "postgresql://h1,h2/gw?target_session_attrs=any&target_session_attrs=read-only",
            {},
            SessionAttrs.READ_ONLY,
        ),
    ],
)
def test_target_session_attrs_default_to_read_write_for_a_list(
    url: str, env: dict[str, str], attrs: SessionAttrs
) -> None:
    """A list of hosts means the writable one; a single host keeps libpq's `any`."""
    assert split_hosts(url, env).target_session_attrs is attrs


@pytest.mark.parametrize(
    ("url", "env", "problem"),
    [
        ("postgresql://h1,,h2/gw", {}, "host 2 of 3 is empty"),
        ("postgresql://h1,/gw", {}, "host 2 of 2 is empty"),
        ("postgresql://h1:port/gw", {}, "host 1 of 1: a port must be a number"),
        ("postgresql://h1:0/gw", {}, "a port must be a number from 1 to 65535"),
        ("postgresql://h1,h2:70000/gw", {}, "host 2 of 2: a port must be a number"),
        ("postgresql://h1,::1/gw", {}, "host 2 of 2: write an IPv6 address in brackets"),
        ("postgresql://h1,[::1]x/gw", {}, "host 2 of 2: an IPv6 address is written"),
        ("postgresql://[::1/gw", {}, "the URL cannot be parsed"),
        ("postgresql://h1/gw?&&=", {}, "the URL cannot be parsed"),
        ("postgresql://h1,h2,h3/gw", {"PGPORT": "1,2"}, "2 ports given for 3 hosts"),
        ("postgresql://h1/gw", {"PGPORT": "x"}, "PGPORT: a port must be a number"),
        ("postgresql:///gw?host=a,b,c&port=1,2", {}, "2 ports given for 3 hosts"),
        ("postgresql:///gw", {"PGHOST": "h1,,h2"}, "host 2 of 3 is empty"),
        ("postgresql:///gw?port=1,2", {"PGHOST": "a,b,c"}, "2 ports given for 3 hosts"),
        # The hosts would come from a service file, and a list there from one budget.
        ("postgresql:///gw?service=prod", {}, "service= takes the hosts from a"),
        ("postgresql:///gw?service=prod", {"PGHOST": "h1,h2"}, "name the hosts in the URL"),
        ("postgresql://h1/gw?target_session_attrs=writable", {}, "target_session_attrs must"),
        ("postgresql://h1/gw", {"PGTARGETSESSIONATTRS": "master"}, "target_session_attrs must"),
    ],
)
def test_an_unreadable_host_list_is_refused_with_its_reason(
    url: str, env: dict[str, str], problem: str
) -> None:
    """Each mistake is named (which host, which part) before anything connects."""
    with pytest.raises(HostListInvalid) as raised:
        split_hosts(url, env)
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://gw:s3cr3t-pw@h1,[::1/gw",  # unparseable: urllib quotes the netloc
        "postgresql://gw:s3cr3t-pw@h1:s3cr3t-pw/gw",  # the password where a port belongs
        "postgresql://gw:pa@s3cr3t-pw@h1,h2/gw",  # a raw `@` in the password
    ],
)
def test_no_error_quotes_the_password(url: str) -> None:
    """Whatever is wrong with the URL, the message never repeats the password."""
    with pytest.raises(HostListInvalid) as raised:
        split_hosts(url, {})
    assert "s3cr3t" not in str(raised.value)


@pytest.mark.parametrize(
    ("hosts", "last_good", "order"),
    [
        # Nothing learnt yet: the URL's order.
        ([A, B, C], None, [A, B, C]),
        # The host that last gave a usable connection first, the others in URL order.
        ([A, B, C], B, [B, A, C]),
        ([A, B, C], C, [C, A, B]),
        ([A, B, C], A, [A, B, C]),
        # A remembered host no longer in the list is ignored.
        ([A, B], C, [A, B]),
    ],
)
def test_the_last_good_host_is_tried_first(
    hosts: list[DatabaseHost], last_good: DatabaseHost | None, order: list[DatabaseHost]
) -> None:
    """After a failover only one connection waits out the old primary's timeout."""
    assert connect_order(hosts, last_good) == tuple(order)


@pytest.mark.parametrize(
    ("connect_timeout_s", "stagger_s"),
    [
        # The pool's default: a black-holed host costs half a second, not five.
        (5.0, 0.5),
        (60.0, 0.5),
        (2.0, 0.5),
        # A shorter timeout: a quarter of it, so the next host starts well before it.
        (1.0, 0.25),
        (0.4, 0.1),
    ],
)
def test_the_next_host_starts_after_the_stagger_delay(
    connect_timeout_s: float, stagger_s: float
) -> None:
    """A host unanswered for this long gets company: the next host's attempt."""
    assert stagger_delay_s(connect_timeout_s) == pytest.approx(stagger_s)


@pytest.mark.parametrize(
    ("outcome", "next_host"),
    [
        (HostOutcome.REFUSED, True),
        (HostOutcome.UNREACHABLE, True),
        (HostOutcome.TIMED_OUT, True),
        (HostOutcome.NOT_MATCHING, True),
        (HostOutcome.UNAVAILABLE, True),
        # A refused login or a missing database would be refused by every copy.
        (HostOutcome.REJECTED, False),
    ],
)
def test_which_failures_move_on_to_the_next_host(outcome: HostOutcome, next_host: bool) -> None:
    """Only a rejection the next host would repeat stops the walk."""
    assert tries_next_host(outcome) is next_host


def test_the_no_host_message_names_every_host_and_what_it_did() -> None:
    """The operator reads which host did what, and which kind of server was wanted."""
    hosts = DatabaseHosts((H("10.0.0.1", 5432), H("::1", 5433)), SessionAttrs.READ_WRITE)
    message = no_host_message(
        hosts,
        [(hosts.hosts[0], HostOutcome.TIMED_OUT), (hosts.hosts[1], HostOutcome.NOT_MATCHING)],
    )
    assert message == (
        "no usable database host (target_session_attrs=read-write): "
        "10.0.0.1:5432 timed out, [::1]:5433 not matching"
    )
    assert hosts.describe() == "10.0.0.1:5432, [::1]:5433"


def _listed(count: int) -> str:
    return ",".join(f"db{i}.internal:5432" for i in range(1, count + 1))


@pytest.mark.parametrize(
    ("url", "env", "source"),
    [
        (f"postgresql://gw@{_listed(17)}/gw", {}, "the URL"),
        (f"postgresql:///gw?host={_listed(17)}", {}, "?host="),
        ("postgresql:///gw", {"PGHOST": _listed(17)}, "PGHOST"),
    ],
)
def test_a_list_longer_than_the_cap_is_refused(url: str, env: dict[str, str], source: str) -> None:
    """Seventeen hosts, wherever they are listed, are one too many: the message says
    where, how many and the cap, and quotes none of them."""
    assert MAX_HOSTS == 16
    with pytest.raises(HostListInvalid) as raised:
        split_hosts(url, env)
    assert str(raised.value) == f"{source} lists 17 hosts; at most 16 are allowed"


def test_a_list_at_the_cap_is_read() -> None:
    """Sixteen hosts are read, each with its port."""
    got = split_hosts(f"postgresql://gw@{_listed(16)}/gw", {})
    assert len(got.hosts) == MAX_HOSTS
    assert got.hosts[-1] == H("db16.internal", 5432)


@pytest.mark.parametrize(
    ("connect_timeout_s", "budget_s"),
    [
        # The pool's default: 10 s for the whole walk, where 16 silent hosts took 12.5 s
        # and 100 took 42 s; migrations' 10 s timeout: 20 s.
        (5.0, 10.0),
        (10.0, 20.0),
        (1.0, 2.0),
    ],
)
def test_the_walk_has_one_budget_of_two_connect_timeouts(
    connect_timeout_s: float, budget_s: float
) -> None:
    """However many hosts are silent, one connect spends at most this."""
    assert walk_budget_s(connect_timeout_s) == pytest.approx(budget_s)


@pytest.mark.parametrize(
    ("connect_timeout_s", "budget_left_s", "timeout_s"),
    [
        # Early in the walk: the host's own timeout.
        (5.0, 10.0, 5.0),
        (5.0, 5.0, 5.0),
        # Late: cut to what is left of the budget.
        (5.0, 2.5, 2.5),
        (5.0, 0.5, 0.5),
        (1.0, 0.25, 0.25),
        # Less than the stagger delay left (0.5 s; 0.25 s for a 1 s timeout), or nothing:
        # no further host is started.
        (5.0, 0.49, None),
        (1.0, 0.2, None),
        (5.0, 0.0, None),
        (5.0, -1.0, None),
    ],
)
def test_a_late_host_gets_what_is_left_of_the_budget(
    connect_timeout_s: float, budget_left_s: float, timeout_s: float | None
) -> None:
    """Each attempt ends by the walk's deadline, and none starts too late to log in."""
    assert attempt_timeout_s(connect_timeout_s, budget_left_s) == timeout_s


def test_the_no_host_message_names_the_hosts_the_budget_left_untried() -> None:
    hosts = DatabaseHosts((A, B, C), SessionAttrs.READ_WRITE)
    message = no_host_message(hosts, [(A, HostOutcome.TIMED_OUT)], [B, C], 10.0)
    assert message == (
        "no usable database host (target_session_attrs=read-write): a:5432 timed out; "
        "not tried within the 10 s connect budget: b:5433, c:5434"
    )
