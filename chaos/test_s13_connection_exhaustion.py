"""Scenario 13: an attacker with no secret tries to exhaust the gateway's connections and
memory while providers deliver signed webhooks (chaos/exhaust.py has the attack).

`[http] max_connections` is set low (40) and more slow-body holds than that (48) run for
the whole load, each coming back 2 s after the gateway closes it; rounds of trailer
floods and pipelined heads over `max_header_bytes` are spread over the load, the first
before the holds so that it finds the gateway with room. The load generator retries a
503 or a cut connection as a provider would.

Every signed webhook must be accepted (some only after a retry), with lost 0 and
doubled 0; the holds must be answered 503 at least once (the attack reached the limit);
every hold is closed by the gateway within `HOLD_BOUND_S` (10 s) of its connect; every
trailer flood is cut before all its bytes are sent; no pipelined oversized head is
answered 200; and the serving process's RSS (`VmRSS` of `gateway serve` and any
children, sampled every 0.2 s) stays within `RSS_GROWTH_BOUND` (32 MiB) of its value
before the load. The bound is about 20 times the growth measured, and below what a
single flood added before the edge counted trailers.

Measured on a 2-vCPU VM (`CHAOS_FULL=1 .venv/bin/pytest -q -s
chaos/test_s13_connection_exhaustion.py`, about 100 s for both variants; figures over
five runs): fast, 200 events, 1-16 signed deliveries answered 503 and then accepted on a
retry, RSS 51.0 -> 52.3 MiB at most, holds closed after at most 2.1 s (the linger after
their early 401), floods cut after at most 5.5 MiB had left the client (socket buffers
included); full, 1,000 events, 11-40 deliveries answered 503, RSS 51.0 -> 52.8 MiB at
most, holds at most 2.2 s, 20 of 20 floods cut. The second pipelined head is never
answered: the gateway closes the connection behind the first answer. Before the edge had
deadlines after an early answer and counted trailers and pipelined heads (the same
scenario without `body_timeout_s`), the fast variant failed: 35 holds were kept for the
whole 240 s run, 1,134 signed deliveries got 503 and 6 events never got a 2xx within
their 20 s of retries, 4 of 6 floods were taken in full (48 MiB each), RSS grew by
197 MiB, and 8 pipelined 40-60 KB heads were answered 200.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from chaos.exhaust import Attacker, RssSampler
from chaos.harness import RESULTS_DIR, profiles
from chaos.workload import LoadSpec


@dataclass(frozen=True)
class Profile:
    events: int
    rate: float
    holds: int  # slow-body holds, all through the load
    rounds: int  # attack rounds, the first at the start of the load
    floods: int  # trailer floods per round
    flood_mib: int  # trailer bytes each flood tries to send
    pipelined: int  # pipelined oversized heads per round
    retry_for_s: float  # how long the load generator retries a delivery


PROFILE = {
    "fast": Profile(200, 40.0, 48, 3, 2, 48, 4, 20.0),
    "full": Profile(1000, 50.0, 48, 10, 2, 64, 6, 60.0),
}
MAX_CONNECTIONS = 40
MAX_HEAD_BYTES = 32_768
HEAD_TIMEOUT_S = 2.0
REQUEST_TIMEOUT_S = 4.0  # the ingestion routes' own body deadline (400), before the edge's
BODY_TIMEOUT_S = 5.0
TRICKLE_S = 2.0  # a hold sends one more body byte this often
REOPEN_S = 2.0  # and comes back this long after the gateway closed it
# A hold lives through its head, its body deadline at most (an early answer closes it
# sooner: LINGER_S), and the trickle interval in which the attacker notices the close.
HOLD_BOUND_S = HEAD_TIMEOUT_S + BODY_TIMEOUT_S + TRICKLE_S + 1.0
RSS_GROWTH_BOUND = 32 * 2**20
MIB = 2**20


@pytest.mark.parametrize("profile", profiles())
async def test_connection_exhaustion_during_signed_load(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    sc = make_scenario(
        f"s13_connection_exhaustion-{profile}",
        database_url,
        nats_node.url,
        http={
            "max_connections": MAX_CONNECTIONS,
            "max_header_bytes": MAX_HEAD_BYTES,
            "header_timeout_s": HEAD_TIMEOUT_S,
            "request_timeout_s": REQUEST_TIMEOUT_S,
            "body_timeout_s": BODY_TIMEOUT_S,
        },
    )
    await sc.open_merchants()
    serve = sc.serve()
    sc.settle()
    await sc.ready("serve")
    assert serve.proc is not None
    rss = RssSampler(serve.proc.pid)
    rss.start()
    spec = LoadSpec(events=p.events, rate_per_s=p.rate, concurrency=8, retry_for_s=p.retry_for_s)
    gen = sc.load(spec)
    attack = Attacker(sc.url(), trickle_s=TRICKLE_S, reopen_s=REOPEN_S)
    running = asyncio.create_task(gen.run())
    for i in range(p.rounds):
        # The first round before the holds, so that it finds the gateway with room.
        await gen.reached(i / p.rounds)
        await attack.floods(p.floods, p.flood_mib * MIB)
        attack.pipelined(p.pipelined)
        if i == 0:
            attack.holds(p.holds)
    record = await running
    await attack.stop()
    await rss.stop()

    result = await sc.finish(record)
    figures = attack.record.figures()
    result.figures.update(
        {
            "rss_baseline_mib": round(rss.baseline / MIB, 1),
            "rss_peak_mib": round(rss.peak / MIB, 1),
            "rss_growth_mib": round((rss.peak - rss.baseline) / MIB, 1),
            **figures,
        }
    )
    result.write(RESULTS_DIR / f"{sc.name}.json")
    (RESULTS_DIR / f"{sc.name}.txt").write_text(result.table() + "\n", encoding="utf-8")
    print(result.table())

    assert result.ok, result.table()
    assert result.figures["never_2xx"] == 0, "a signed webhook was never accepted"
    assert result.figures["unexpected_parked"] == 0
    assert set(result.figures["rejected"]) <= {"401", "503", "no_answer"}
    assert rss.peak - rss.baseline < RSS_GROWTH_BOUND, figures
    r = attack.record
    assert r.statuses["hold"][503] > 0, "the attack never reached max_connections"
    assert max(r.hold_s, default=0.0) < HOLD_BOUND_S, "a hold outlived its bound"
    assert max(r.hold_open_s, default=0.0) < HOLD_BOUND_S, "a hold outlived its bound"
    assert r.flood_cut == len(r.flood_sent) == p.rounds * p.floods, figures
    assert 200 not in r.statuses["pipelined"], figures
