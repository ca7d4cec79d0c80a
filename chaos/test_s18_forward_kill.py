"""Scenario 18: `gateway forward` is SIGKILLed and NATS is restarted while providers
send (2,000 events in the full variant); the forwarder is started again.

Messages the killed forwarder had fetched and not acknowledged are redelivered after its
`ack_wait`; those it had sent and not yet acknowledged reach the target a second time,
under the same `webhook-id`. The receiver sees every accepted event at least once, and,
de-duplicated on `webhook-id`, exactly once: nothing is lost, nothing foreign arrives.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import pytest

from chaos.harness import profiles
from chaos.workload import LoadSpec
from gateway.core.forward.request import webhook_id
from tests.support.forward_target import Target, serving
from tests.support.forwarding import FORWARD_SECRET
from tests.support.services import wait_until

PROFILE = {
    "fast": {"events": 300, "rate": 0.0},
    "full": {"events": 2000, "rate": 150.0},
}


@pytest.mark.parametrize("profile", profiles())
async def test_forwarder_kill_and_nats_restart_lose_nothing(
    profile, make_scenario, database_url, nats_node, monkeypatch
):
    p = PROFILE[profile]
    monkeypatch.setenv("FWD_SECRET", FORWARD_SECRET)  # the forwarder's environment
    async with serving(Target(latency_s=(0.0, 0.01))) as target:
        sc = make_scenario(
            f"s18_forward_kill-{profile}",
            database_url,
            nats_node.url,
            forward={
                "chaos": {
                    "url": target.url,
                    "secret_env": "FWD_SECRET",
                    "allow_private": True,
                    "start": "start",
                    "timeout_s": 1.0,
                    "max_in_flight": 64,
                    "retry": "0.5s,1s,2s,4s,8s,8s,8s",
                    "ordered": False,
                }
            },
        )
        sc.serve()
        await sc.ready("serve")
        forwarder = sc._spawn("forward", ["forward", "--name", "chaos", "--output", "quiet"], None)
        gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
        running = asyncio.create_task(gen.run())
        await gen.reached(0.3)
        await wait_until(lambda: _some(target), timeout_s=30)
        forwarder.kill()
        await asyncio.sleep(0.5)
        forwarder.start()
        await gen.reached(0.6)
        nats_node.kill()
        await asyncio.sleep(2.0)
        nats_node.start()
        await running

        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch(
                "SELECT provider, event_id FROM processed_webhooks WHERE subject IS NOT NULL"
            )
        finally:
            await conn.close()
        accepted = {webhook_id(r["provider"], r["event_id"]) for r in rows}
        assert len(accepted) >= p["events"] // 2

        async def all_arrived() -> bool:
            assert forwarder.alive, forwarder.log_path.read_text()[-2000:]
            return accepted <= {r.webhook_id for r in target.delivered()}

        await wait_until(all_arrived, timeout_s=180, interval_s=0.5)
    copies = Counter(r.webhook_id for r in target.delivered())
    assert set(copies) == accepted  # lost 0, and nothing that was not accepted
    repeats = sum(n - 1 for n in copies.values())
    print(f"accepted {len(accepted)}, deliveries {sum(copies.values())}, repeats {repeats}")
    # The stream's copy and the delivery's id agree for every event.
    for r in target.delivered():
        assert r.webhook_id == webhook_id(r.headers["gateway-provider"], _event_id(r.headers))


async def _some(target: Target) -> bool:
    return len(target.delivered()) > 0


def _event_id(headers: dict[str, str]) -> str:
    """The event id the delivery names (escaped beyond ASCII, which this load never is)."""
    return headers["gateway-event-id"]
