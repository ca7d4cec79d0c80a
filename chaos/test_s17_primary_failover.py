"""Scenario 17: the database primary's machine is lost under load; the standby is promoted.

A private primary and a streaming standby (`tests/support/pg_pair.py`), the database
migrated on the primary before the standby was made from it. The gateway's processes
(`serve` only records, `[outbox] inline = false`; `relay` and `settle` on their own) use
one multi-host URL: the primary through a fault proxy, then the standby, with
`target_session_attrs=read-write`. At 30 % of a signed load the primary vanishes: its
address becomes a black hole (nothing answers, nothing is refused) and every one of its
processes is SIGKILLed. After a detection delay the standby is promoted (`pg_ctl
promote`). No gateway process is restarted: each must find the new primary by itself.

Synchronous standby (`sync`): the audit, against the new primary, passes: every event
answered 2xx is there, on the stream and settled once (lost, doubled, phantom 0). Until
the promotion no 2xx is answered for an event not committed before the loss. At start-up
the gateway logs the database durability as `synchronous`, no warning.

Asynchronous standby (`async`): the risk the durability check warns about. The gateway
logs the `at_risk` warning at start-up, and the audit counts the acknowledged events
the failover lost (`acked_missing`: not on the new primary; `acked_recorded_again`: a
later delivery recorded one again, answered `accepted` twice). They may be 0 on a fast
machine: nothing is asserted about them.

Figures: seconds from the loss to each process's first success after it (serve's first
`accepted` answer, the relay's first publish of a row only the new primary has, the
first settlement committed there) and to the promotion.
"""

from __future__ import annotations

import asyncio

import pytest

from chaos.audit import AuditResult, audit
from chaos.failover import (
    Failover,
    drain_recoverable,
    durability_lines,
    lose_primary,
    lost_acknowledgements,
    recovery,
    stream_copies,
)
from chaos.harness import RESULTS_DIR, profiles
from chaos.loadgen import Answer, LoadRecord
from chaos.workload import LoadSpec

PROFILE = {
    "fast": {"events": 300, "rate": 80.0, "detect_s": 1.5, "drain_s": 120.0},
    "full": {"events": 2000, "rate": 120.0, "detect_s": 2.0, "drain_s": 180.0},
}
#: How soon every process must work again after the loss. Generous: measured well
#: below it (chaos/README.md); it catches a process that never finds the new primary.
RECOVERY_BOUND_S = 60.0
#: Asynchronous: the drain ends once what is missing has not changed for this long (a
#: settlement lost with the primary never comes back). Beyond the longest settlement
#: retry delay (30 s in the scenarios' config) it would wait for nothing more.
QUIET_S = 35.0


def refused_until_promoted(record: LoadRecord, failover: Failover) -> list[str]:
    """Answers completed between the loss and the promotion that were a 2xx for an event
    not committed before the loss (nothing could commit then: the one writable server
    was gone). Allowed: any 2xx for an event whose row the standby held just before its
    promotion (`failover.survived`: committed before the loss and kept; when its first
    2xx reached the load generator depends on the machine's pace, not on when it
    committed), and `duplicate` for an event answered
    before the loss, from the serving process's memory (asynchronous replication: its
    row may be gone with the primary, which the audit counts)."""
    genuine = [a for a in record.answers if record.events[a.event].kind != "forged"]
    before = {
        a.event for a in genuine if 200 <= a.status < 300 and a.at_s + a.took_s < failover.kill_at
    }
    wrong = []
    for a in genuine:
        done = a.at_s + a.took_s
        if not (failover.kill_at + 0.5 < done < failover.promote_at) or a.status >= 300:
            continue
        event = record.events[a.event]
        if (event.provider, event.event_id) in failover.survived:
            continue
        if not (a.outcome == "duplicate" and a.event in before):
            wrong.append(f"{a.status} {a.outcome} at {done:.2f}s for event {a.event}")
    return wrong


def write(result: AuditResult, name: str) -> None:
    print(result.table(), flush=True)
    result.write(RESULTS_DIR / f"{name}.json")
    (RESULTS_DIR / f"{name}.txt").write_text(result.table() + "\n", encoding="utf-8")


@pytest.mark.parametrize("pg_failover", ["sync", "async"], indirect=True)
@pytest.mark.parametrize("profile", profiles())
async def test_primary_lost_and_standby_promoted(profile, pg_failover, make_scenario, nats_node):
    p = PROFILE[profile]
    pg_pair = pg_failover.pair
    replication = "sync" if pg_pair.synchronous else "async"
    name = f"s17_primary_failover-{replication}-{profile}"
    url = pg_pair.multi_host_url(primary_port=pg_failover.primary.listen_port)
    sc = make_scenario(name, url, nats_node.url, outbox={"inline": False})
    sc.database_url = pg_pair.primary_dsn  # direct, for the set-up; the audit's moves later
    await sc.open_merchants()
    serve, relay, worker = sc.serve(), sc.relay(), sc.settle()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    running = asyncio.create_task(gen.run())

    await gen.reached(0.3)
    failover = await lose_primary(pg_failover, gen, p["detect_s"])
    sc.database_url = pg_pair.standby_dsn
    record = await running

    quiet_s = None if pg_pair.synchronous else QUIET_S
    drain_s = await drain_recoverable(sc.database_url, record, p["drain_s"], quiet_s=quiet_s)
    result = await audit(
        name,
        record,
        database_url=sc.database_url,
        nats_url=nats_node.url,
        config_path=sc.config,
        drain_s=drain_s,
        quiet=True,
    )
    figures = await recovery(record, failover, sc.database_url, nats_node.url)
    after = [a for a in record.answers if a.at_s + a.took_s > failover.kill_at]
    result.figures |= {
        **figures,
        **lost_acknowledgements(record, result.problems),
        "answers_after_loss": dict(sorted((str(k), v) for k, v in _statuses(after).items())),
        "starts": [serve.starts, relay.starts, worker.starts],
        # The relay goes on from the cursor it finds on the promoted standby; what it
        # published and could not record there is sent again, and dropped by the stream's
        # duplicate window.
        "stream_copies": await stream_copies(nats_node.url, record.run),
        # The periodic check (every 30 s) of a process that outlived the loss long
        # enough reads the new primary: no standby of its own.
        "warned_after_loss": [
            process.name
            for process in (serve, relay, worker)
            if any(
                line.get("level") == "warning"
                for line in durability_lines(process, after=failover.kill_wall)
            )
        ],
    }
    write(result, name)
    print(f"{name}: kill → first success: {figures}", flush=True)

    assert serve.alive and relay.alive and worker.alive, "a process died"
    assert result.figures["never_2xx"] == 0, result.table()
    assert result.figures["stream_copies"] == 0, "a re-publish got past the duplicate window"
    assert 503 in _statuses(after), "nothing was refused while no primary could commit"
    wrong = refused_until_promoted(record, failover)
    assert not wrong, f"2xx without a commit before the promotion: {wrong[:5]}"
    for key in ("serve_first_2xx_s", "relay_first_publish_s", "settle_first_settled_s"):
        assert figures[key] is not None and figures[key] < RECOVERY_BOUND_S, (key, figures)
    at_start = durability_lines(serve, before=failover.kill_wall)
    warnings = [line for line in at_start if line.get("level") == "warning"]
    if pg_pair.synchronous:
        assert result.ok, result.table()
        assert [line.get("state") for line in at_start] == ["synchronous"], at_start
    else:
        # The warning the durability check gives for exactly this risk.
        assert [line.get("state") for line in warnings] == ["at_risk"], at_start
        print(f"{name}: serve warned: {warnings[0]['msg']}", flush=True)


def _statuses(answers: list[Answer]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for a in answers:
        counts[a.status] = counts.get(a.status, 0) + 1
    return counts
