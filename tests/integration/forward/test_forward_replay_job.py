"""A console replay job over `forward:NAME` dead letters: `gateway dlq run-jobs`'s runner
sends each parked event once more to the `[forward.NAME]` target, signed with the
destination's secret and under the event's own `webhook-id`; a `2xx` resolves the row,
another answer leaves it open with the target's answer as its error."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
import standardwebhooks

from gateway import settings as settings_mod
from gateway.adapters.postgres import replay_jobs as store
from gateway.adapters.postgres import transaction
from gateway.core.forward.request import webhook_id
from gateway.core.replay.jobs import JobKind, NewJob
from gateway.dlq import jobs as jobs_mod
from gateway.wiring import jobs as wiring_jobs
from gateway.wiring import ops
from tests.support.config_file import with_urls, write_toml
from tests.support.forward_target import Received, Target, serving
from tests.support.forwarding import FORWARD_SECRET


async def park(db: asyncpg.Connection, event_id: str) -> int:
    row_id: int = await db.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, received_at) VALUES ('forward:billing', 'stripe', $1,"
        " 'FORWARD_ATTEMPTS_EXHAUSTED', 'HTTP 500 after 10 attempts', $2,"
        " now() - interval '1 hour') RETURNING id",
        event_id,
        f'{{"id": "{event_id}"}}'.encode(),
    )
    return row_id


@pytest.mark.parametrize("failing", [False, True], ids=["target back", "target still failing"])
async def test_a_replay_job_delivers_forward_dead_letters_to_their_target(
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    failing: bool,
) -> None:
    monkeypatch.setenv("FWD_SECRET", FORWARD_SECRET)

    def answer(r: Received) -> tuple[int, dict[str, str], bytes]:
        return (503, {}, b"down for maintenance") if failing else (200, {}, b"ok")

    async with serving(Target(answer)) as target:
        doc = with_urls({"database": {"url": database_url}})
        doc["forward"] = {
            "billing": {"url": target.url, "secret_env": "FWD_SECRET", "allow_private": True}
        }
        settings = settings_mod.load(write_toml(tmp_path / "gateway.toml", doc))
        db = await asyncpg.connect(database_url)
        try:
            ids = [await park(db, f"evt_job_{n}") for n in range(2)]
            async with ops.database(settings) as pool, transaction(pool) as conn:
                await store.create_job(
                    conn, NewJob(JobKind.DLQ, "console:alice", {"ids": ids}, tuple(ids))
                )
            options = jobs_mod.RunnerOptions(once=True, poll_s=0.05, heartbeat_s=0.1)
            assert await wiring_jobs.run_jobs(settings, options) == 1
            rows = await db.fetch(
                "SELECT is_resolved, attempts, error_message FROM dlq_webhooks ORDER BY id"
            )
        finally:
            await db.close()
    assert [r.headers["gateway-event-id"] for r in target.received] == ["evt_job_0", "evt_job_1"]
    for request in target.received:
        standardwebhooks.Webhook(FORWARD_SECRET).verify(request.body, request.headers)
        event_id = request.headers["gateway-event-id"]
        assert request.webhook_id == webhook_id("stripe", event_id)
        assert request.body == f'{{"id": "{event_id}"}}'.encode()
    if failing:
        assert [(r["is_resolved"], r["attempts"]) for r in rows] == [(False, 2), (False, 2)]
        assert all("HTTP 503" in r["error_message"] for r in rows)
        # The answer's text stays out of the message every role reads: its size only.
        assert all("down for maintenance" not in r["error_message"] for r in rows)
        assert all("its answer had a body" in r["error_message"] for r in rows)
    else:
        assert [r["is_resolved"] for r in rows] == [True, True]
