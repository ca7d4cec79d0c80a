"""Sampling decided before the SDK, in a real `gateway serve` process exporting to a
receiver in the test: at `sample_ratio = 0` an ordinary request leaves no span and its
event carries a `traceparent` with flags 00 (row and message), so that the processes
downstream skip it too; with `trust_incoming`, a sender's sampled `traceparent` is
joined only by a request whose signature verified."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.integration.tracing.test_traces import SERVER, Run, payment, start, stop
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config
from tests.support.otlp import running_receiver
from tests.support.services import free_port, stream_messages, wait_ready
from tests.support.settlement import fetch

#: A trusted sender's span, sampled: `-01` asks for the request to be recorded.
SENDERS = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SENDERS_TRACE, SENDERS_SPAN = SENDERS.split("-")[1:3]


async def test_unsampled_requests_leave_no_span_and_only_verified_senders_are_joined(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """Three requests at ratio 0 with `trust_incoming`: a signed one without a header
    (no span; its row and message carry flags 00); one with a bad signature and the
    sender's `-01` (refused, no span); a signed one with it (its request, commit and
    publish spans join the sender's trace). Nothing else reaches the receiver."""
    async with running_receiver() as receiver:
        port = free_port()
        doc = config(
            database_url,
            nats_url,
            http={"port": port},
            tracing={"endpoint": receiver.url, "sample_ratio": 0.0, "trust_incoming": True},
        )
        cfg = str(write_toml(tmp_path / "gateway.toml", doc))
        serve = start(["serve", "--config", cfg], tmp_path / "serve.log")
        try:
            run = Run(receiver, port, (tmp_path / "serve.log", tmp_path / "none.log"))
            async with httpx.AsyncClient(base_url=run.url, timeout=10) as client:
                await wait_ready(client)
                await run.send("evt_unsampled", payment("evt_unsampled", "pi_u", "m_x"))
                forged = deliver("stripe", "evt_forged", body=payment("evt_forged", "pi_f", "m_x"),
                                 secret="whsec_not_the_providers")  # fmt: skip
                answer = await client.post(
                    forged.path, content=forged.body,
                    headers={**forged.headers, "traceparent": SENDERS},
                )  # fmt: skip
                assert answer.status_code == 401, answer.text
            await run.send("evt_joined", payment("evt_joined", "pi_j", "m_x"), traceparent=SENDERS)
            await receiver.wait_for(lambda s: s.name == "publish")
            await asyncio.sleep(1.0)  # spans are exported every 0.1 s: time for strays
        finally:
            stop(serve)
    spans = {s.name: s for s in receiver.spans}
    assert sorted(s.name for s in receiver.spans) == sorted(spans)  # one of each
    assert set(spans) == {"POST /webhooks/{provider}", "commit.wait", "publish"}
    request = spans["POST /webhooks/{provider}"]
    assert request.kind == SERVER and request.attributes["gateway.event_id"] == "evt_joined"
    assert (request.trace_id, request.parent_span_id) == (SENDERS_TRACE, SENDERS_SPAN)
    assert {s.trace_id for s in receiver.spans} == {SENDERS_TRACE}

    rows = await fetch(database_url, "SELECT event_id, traceparent FROM processed_webhooks")
    stored = {r["event_id"]: r["traceparent"] for r in rows}
    assert set(stored) == {"evt_unsampled", "evt_joined"}  # the forged one was refused
    assert stored["evt_unsampled"].endswith("-00")
    assert stored["evt_joined"].split("-")[1:] == [SENDERS_TRACE, request.span_id, "01"]
    sent = {h["Nats-Msg-Id"]: h.get("traceparent") for _, h, _ in await stream_messages(nats_url)}
    unsampled, joined = sent["stripe:evt_unsampled"], sent["stripe:evt_joined"]
    assert unsampled == stored["evt_unsampled"]  # forwarded as recorded: no publish span
    assert joined is not None and joined.split("-")[1] == SENDERS_TRACE
    assert joined.split("-")[2] == spans["publish"].span_id


#: One trace per sender, so each provider's spans are told apart.
REPLAYED = {
    "github": "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01",
    "shopify": "00-2af7651916cd43dd8448eb211c80319c-d7ad6b7169203331-01",
}
REPLAYS = 50


async def test_a_replayed_delivery_cannot_force_sampling(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """At ratio 0 with `trust_incoming`: one captured GitHub and one Shopify delivery
    (signatures over the body alone) carrying the sender's `-01`. The first sending is
    newly accepted and joins the sender's trace (request, commit wait, publish); 50
    replays of each, under the captured id or a new one, are answered `duplicate` and
    draw at ratio 0 like any request: not one more span reaches the receiver."""
    async with running_receiver() as receiver:
        port = free_port()
        doc = config(
            database_url,
            nats_url,
            http={"port": port},
            tracing={"endpoint": receiver.url, "sample_ratio": 0.0, "trust_incoming": True},
        )
        cfg = str(write_toml(tmp_path / "gateway.toml", doc))
        serve = start(["serve", "--config", cfg], tmp_path / "serve.log")
        answers: dict[str, list[str]] = {name: [] for name in REPLAYED}
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                await wait_ready(client)
                for name, senders in REPLAYED.items():
                    captured = deliver(name, f"{name}-delivery-1", "push")
                    for n in range(1 + REPLAYS):
                        # The id header is not signed: half the replays change it.
                        delivery_id = f"{name}-forged-{n}" if n % 2 else captured.event_id
                        id_header = (
                            "X-GitHub-Delivery" if name == "github" else "X-Shopify-Webhook-Id"
                        )
                        headers = {**captured.headers, id_header: delivery_id,
                                   "traceparent": senders}  # fmt: skip
                        answer = await client.post(captured.path, content=captured.body,
                                                   headers=headers)  # fmt: skip
                        assert answer.status_code == 200, answer.text
                        answers[name].append(answer.json()["status"])
            await receiver.wait_for(lambda s: s.name == "publish", count=len(REPLAYED))
            await asyncio.sleep(1.0)  # spans are exported every 0.1 s: time for strays
        finally:
            stop(serve)
    for name, senders in REPLAYED.items():
        assert answers[name] == ["accepted"] + ["duplicate"] * REPLAYS
        trace_id = senders.split("-")[1]
        names = sorted(s.name for s in receiver.spans if s.trace_id == trace_id)
        assert names == sorted(["POST /webhooks/{provider}", "commit.wait", "publish"]), name
    assert len(receiver.spans) == 3 * len(REPLAYED)  # no replay was recorded, in any trace
    outcomes = [s.attributes.get("gateway.outcome") for s in receiver.spans if s.kind == SERVER]
    assert outcomes == ["accepted"] * len(REPLAYED)
