"""Serve's writer when its database goes silent (the primary's machine lost under an
established connection): the waiting request is answered 503 within about the commit
timeout, not the statement timeout, and the next commit goes to the host that answers.

The URL lists a proxy to the shared PostgreSQL first and the shared server itself second;
the proxy is used (and remembered) until it is black-holed: from then it passes nothing
and closes nothing, as a vanished machine. One writer, so "the next group" is the next
request, on the same writer that lived through the silence.
"""

from __future__ import annotations

import logging
import time

import asyncpg
import pytest

from tests.support.database_faults import database_proxy, with_hosts
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server

COMMIT_TIMEOUT_S = 2.0
#: The pool's statement timeout (`create_pool`'s default): what the writer waited on a
#: silent server before its statements were bounded by the commit timeout.
COMMAND_TIMEOUT_S = 10.0


async def rows(database_url: str, event_id: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM processed_webhooks WHERE event_id = $1", event_id
            )
        )
    finally:
        await conn.close()


@pytest.mark.parametrize("batching", [True, False], ids=["group-commit", "one-commit-per-request"])
async def test_a_silent_database_is_a_503_within_the_commit_timeout_then_the_other_host(
    database_url: str, nats_url: str, batching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.ingest.inbox")
    async with database_proxy() as proxy:
        url = with_hosts(database_url, proxy.listen)
        ingest = {"commit_timeout_s": COMMIT_TIMEOUT_S, "batching": batching, "writers": 1}
        async with running_server(config(url, nats_url, ingest=ingest)) as server:

            async def post(event_id: str) -> tuple[int, str, float]:
                d = deliver("stripe", event_id)
                started = time.monotonic()
                answer = await server.client.post(d.path, content=d.body, headers=d.headers)
                took_s = time.monotonic() - started
                status = answer.json().get("status", "") if answer.status_code == 200 else ""
                return answer.status_code, status, took_s

            assert (await post("evt_before"))[:2] == (200, "accepted")
            assert proxy.connections >= 1, "the first host took the commit"
            await proxy.set_blackhole(True)

            status, _, took_s = await post("evt_silent")
            assert status == 503
            # Answered at the commit timeout, and the writer let go of its connection
            # then, instead of waiting out the statement timeout on it.
            assert COMMIT_TIMEOUT_S <= took_s < COMMIT_TIMEOUT_S + 1.5 < COMMAND_TIMEOUT_S

            # The next commit finds the other host (the silent one, remembered, is
            # tried first and left unanswered), within the request's own deadline.
            assert (await post("evt_after"))[:2] == (200, "accepted")
            # The provider's retry of the refused event: the silent host swallowed it,
            # so nothing committed it, and it is accepted now.
            assert (await post("evt_silent"))[:2] == (200, "accepted")
            await proxy.close()  # lets the gateway's shutdown close its silent connections
    for event_id in ("evt_before", "evt_silent", "evt_after"):
        assert await rows(database_url, event_id) == 1, event_id
    writer = [r for r in caplog.records if r.name == "gateway.ingest.inbox"]
    assert not [r.getMessage() for r in writer if r.levelno >= logging.ERROR]
    if batching:  # the writer says why it let go of its connection
        assert [r.getMessage() for r in writer] == ["group commit timed out"]
