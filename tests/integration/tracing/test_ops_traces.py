"""The operator's side traced: `gateway dlq replay` (a span per replayed row) and
backfill, run by `gateway backfill` or as a scheduled pass of `gateway serve` (a span
per pass, a child per recovered event), exported over OTLP/HTTP to a receiver running
in the test."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from gateway import settings as settings_mod
from gateway.dlq.parts import StageHandlers
from gateway.wiring.backfill import run_backfill
from tests.integration.backfill.test_scheduled import serving
from tests.integration.dlq.test_dlq_cli import handlers, park, replay_in_process
from tests.support.config_file import write_toml
from tests.support.gateway import config, running_server
from tests.support.otlp import STATUS_ERROR, running_receiver
from tests.support.provider_apis import API_KEY, running_apis, stand_in_keys, stripe_event
from tests.support.services import stream_messages, wait_until

__all__ = ["handlers"]  # the fixture, imported for the replay test

#: The traceparent a settlement message carried when it was parked.
PARKED_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def with_stripe_api(
    doc: dict[str, Any], api_url: str, schedule: dict[str, float] | None = None
) -> settings_mod.Settings:
    doc = copy.deepcopy(doc)
    doc["providers"]["stripe"] |= stand_in_keys(api_url)
    if schedule is not None:
        doc["providers"]["stripe"]["backfill"] = schedule
    return settings_mod.parse(doc, env={"PROVIDER_API_KEY": API_KEY})


async def test_each_replayed_row_is_a_span_with_stage_error_class_and_outcome(
    tmp_path: Path, database_url: str, nats_url: str, handlers: StageHandlers
) -> None:
    """Two rows replayed: the one that settles is `replayed`; the one that fails again is
    `failed` with the new error class and an error status; both keep the class they
    were parked with, and a row whose message carried a traceparent links to it."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("CREATE TABLE replay_log (seq bigserial, dlq_id bigint, event_id text)")
        ok = await park(conn, "evt_ok", error_class="RATE_UNAVAILABLE")
        bad = await park(conn, "fail_1")
        await conn.execute(
            "UPDATE dlq_webhooks SET headers = $1::jsonb WHERE id = $2",
            f'{{"traceparent": "{PARKED_TRACEPARENT}"}}',
            ok,
        )
    finally:
        await conn.close()
    async with running_receiver() as receiver:
        doc = config(database_url, nats_url, tracing={"endpoint": receiver.url})
        cfg = str(write_toml(tmp_path / "gateway.toml", doc))
        status = await asyncio.to_thread(replay_in_process, "--all", "--config", cfg)
        assert status == 1  # one row failed
        spans = await receiver.wait_for(lambda s: s.name == "dlq.replay", count=2)
    by_id = {s.attributes["gateway.dlq.id"]: s for s in spans}
    replayed, failed = by_id[ok], by_id[bad]
    assert {s.service for s in spans} == {"gateway-dlq-replay"}
    for span in spans:
        assert span.attributes["gateway.stage"] == "settlement"
        assert span.attributes["gateway.provider"] == "stripe"
        assert span.parent_span_id == ""
    assert replayed.attributes["gateway.outcome"] == "replayed"
    assert replayed.attributes["gateway.dlq.error_class"] == "RATE_UNAVAILABLE"
    assert "gateway.error_class" not in replayed.attributes
    assert replayed.status_code != STATUS_ERROR
    assert replayed.links == (tuple(PARKED_TRACEPARENT.split("-")[1:3]),)
    assert failed.attributes["gateway.outcome"] == "failed"
    assert failed.attributes["gateway.event_id"] == "fail_1"
    assert failed.attributes["gateway.dlq.error_class"] == "UNKNOWN_MERCHANT"
    assert failed.attributes["gateway.error_class"] == "UNKNOWN_MERCHANT"
    assert failed.status_code == STATUS_ERROR
    assert failed.links == ()


async def test_a_backfill_run_is_one_span_with_a_child_per_recovered_event(
    database_url: str, nats_url: str
) -> None:
    """`gateway backfill` over three missing events: one `backfill` span with the
    provider and the counts, three `backfill.recover` children, and each published
    message carries its recover span's traceparent (so its settlement joins the trace)."""
    now = datetime.now(UTC).replace(microsecond=0)
    async with (
        running_receiver() as receiver,
        running_apis() as apis,
        running_server(config(database_url, nats_url)),  # the stream, untraced
    ):
        apis.stripe_events = [stripe_event(n, now - timedelta(minutes=30 - n)) for n in range(3)]
        doc = config(database_url, nats_url, tracing={"endpoint": receiver.url})
        settings = with_stripe_api(doc, apis.url)
        report = await run_backfill(
            settings, "stripe", since=now - timedelta(hours=1), until=None, types=[], now=now
        )
        assert report.tally.recovered == 3
        [run] = await receiver.wait_for(lambda s: s.name == "backfill")
        children = await receiver.wait_for(lambda s: s.name == "backfill.recover", count=3)
    assert run.service == "gateway-backfill" and run.parent_span_id == ""
    assert run.attributes["gateway.provider"] == "stripe"
    assert run.attributes["gateway.outcome"] == "done"
    counts = {k: run.attributes[f"gateway.backfill.{k}"] for k in ("fetched", "recovered")}
    assert counts == {"fetched": 3, "recovered": 3}
    assert run.attributes["gateway.backfill.unpublished"] == 0
    assert {(c.trace_id, c.parent_span_id) for c in children} == {(run.trace_id, run.span_id)}
    assert {c.attributes["gateway.outcome"] for c in children} == {"published"}
    by_event = {c.attributes["gateway.event_id"]: c for c in children}
    assert sorted(by_event) == [e["id"] for e in apis.stripe_events]
    messages = [m for m in await stream_messages(nats_url) if m[0].startswith("webhooks.stripe.")]
    assert len(messages) == 3
    for _, headers, _ in messages:
        child = by_event[headers["Gateway-Event-Id"]]
        assert headers["traceparent"].split("-")[1:3] == [child.trace_id, child.span_id]


async def test_a_scheduled_pass_of_serve_is_a_span(database_url: str, nats_url: str) -> None:
    """`gateway serve`'s scheduled pass exports its `backfill` span as gateway-serve."""
    now = datetime.now(UTC)
    async with running_receiver() as receiver, running_apis() as apis:
        apis.stripe_events = [stripe_event(n, now - timedelta(minutes=10 - n)) for n in range(2)]
        doc = config(database_url, nats_url, tracing={"endpoint": receiver.url})
        schedule = {"interval_s": 1.0, "window_s": 7200}
        async with serving(with_stripe_api(doc, apis.url, schedule)):

            async def recovered() -> bool:
                return any(
                    s.name == "backfill" and s.attributes.get("gateway.backfill.recovered") == 2
                    for s in receiver.spans
                )

            await wait_until(recovered, timeout_s=20)
    [run] = receiver.where(
        lambda s: s.name == "backfill" and s.attributes.get("gateway.backfill.recovered") == 2
    )
    assert run.service == "gateway-serve"
    assert run.attributes["gateway.provider"] == "stripe"
    children = receiver.where(lambda s: s.name == "backfill.recover")
    assert len(children) == 2 and {c.parent_span_id for c in children} == {run.span_id}
