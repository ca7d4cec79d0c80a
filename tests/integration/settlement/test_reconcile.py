"""`gateway reconcile`: accepted events whose stream messages were lost after the PubAck are
found and re-published under a new message id, and settle exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import nats
import orjson
import pytest

from gateway import cli
from gateway import settings as settings_mod
from gateway.core.events.model import Event
from gateway.errors import BrokerUnavailable
from gateway.settlement.reconcile import Verdict, verdict
from gateway.wiring.settlement import run_reconcile
from tests.support.deliveries import deliver
from tests.support.gateway import RunningServer, config, running_server
from tests.support.nats import NatsServer
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import fetch, open_merchant, running_worker, settlement_sections
from tests.support.stub import Stub

SCHEMES = {"stripe": "stripe", "standard": "standard"}
SUBJECTS = ("webhooks.*.payment_intent.succeeded", "webhooks.*.charge.refunded")


def payment(event_id: str, pi: str, merchant: str = "m_rec", amount: int = 1000) -> bytes:
    obj = {
        "id": pi,
        "amount_received": amount,
        "currency": "usd",
        "metadata": {"merchant_id": merchant},
    }
    return orjson.dumps(
        {"id": event_id, "type": "payment_intent.succeeded", "data": {"object": obj}}
    )


def event(provider: str, event_type: str | None, body: bytes) -> Event:
    subject = f"webhooks.{provider}.{event_type}" if event_type else None
    return Event(provider, "evt", event_type, subject, {}, body, datetime.now(UTC))


@pytest.mark.parametrize(
    ("provider", "event_type", "body", "expected"),
    [
        # A Stripe payment settles, with the transfer id the worker would post.
        ("stripe", "payment_intent.succeeded", payment("e", "pi_1"), Verdict.SETTLES),
        # A type the worker does not consume is none of reconcile's business.
        ("stripe", "customer.created", b'{"id":"e","type":"customer.created"}', Verdict.IGNORED),
        # Standard Webhooks senders never settle in this gateway.
        ("standard", "payment_intent.succeeded", payment("e", "pi_1"), Verdict.IGNORED),
        # Consumed but unusable: re-published so the worker parks it with its reason.
        ("stripe", "payment_intent.succeeded", b'{"id":"e","data":{}}', Verdict.INVALID),
        # No subject at all (parked at ingest): never published, never reconciled.
        ("stripe", None, b"{}", Verdict.IGNORED),
    ],
)
def test_verdict(provider: str, event_type: str | None, body: bytes, expected: Verdict) -> None:
    kind, tid = verdict(event(provider, event_type, body), SCHEMES, SUBJECTS)
    assert kind is expected
    assert (tid is not None) == (expected is Verdict.SETTLES)


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    return config(database_url, nats_url, **settlement_sections(stub.url, redis_url))


async def post(server: RunningServer, event_id: str, body: bytes) -> None:
    d = deliver("stripe", event_id, body=body)
    response = await server.client.post(d.path, content=d.body, headers=d.headers)
    assert response.status_code == 200, response.text


async def purge(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().purge_stream("WEBHOOKS")
    finally:
        await nc.close()


async def scalar(dsn: str, sql: str) -> int:
    return int((await fetch(dsn, sql))[0][0])


async def all_published(dsn: str) -> bool:
    return (
        await scalar(
            dsn, "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)"
        )
        == 0
    )


async def test_lost_messages_are_republished_and_settle_once(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    settings = settings_mod.parse(doc, env={})
    async with running_server(doc) as server:
        # 1. Settled before the loss: must not be re-published.
        async with running_worker(doc) as parts:
            await open_merchant(parts, "m_rec")
            await post(server, "evt_early", payment("evt_early", "pi_early"))
            await wait_until(lambda: scalar(database_url, "SELECT count(*) FROM settlements"))
        # 2. Accepted and acknowledged by the stream while no worker ran, then lost.
        for i in range(5):
            await post(server, f"evt_lost_{i}", payment(f"evt_lost_{i}", f"pi_lost_{i}"))
        await post(server, "evt_other", b'{"id":"evt_other","type":"customer.created"}')
        await post(server, "evt_unknown_merchant", payment("evt_unknown_merchant", "pi_u", "m_no"))
        await wait_until(lambda: all_published(database_url))
        await purge(nats_url)
        # An open dead letter is an outcome: the unknown merchant's event stays parked.
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
                " payload) VALUES ('settlement', 'stripe', 'evt_unknown_merchant',"
                " 'UNKNOWN_MERCHANT', 'no account', '')"
            )
        finally:
            await conn.close()

        dry = await run_reconcile(settings, older_than_s=0, dry_run=True)
        assert sorted(dry.events) == [f"stripe:evt_lost_{i}" for i in range(5)]
        assert (dry.scanned, dry.settled, dry.republished) == (6, 1, 0)
        assert await stream_messages(nats_url) == []  # a dry run publishes nothing
        too_young = await run_reconcile(settings, older_than_s=3600)
        assert too_young.scanned == 0 and too_young.republished == 0

        report = await run_reconcile(settings, older_than_s=0)
        assert report.republished == 5 and report.failed == 0
        messages = await stream_messages(nats_url)
        ids = sorted(h["Nats-Msg-Id"] for _, h, _ in messages)
        assert ids == [f"stripe:evt_lost_{i}:reconcile-{report.run_id}" for i in range(5)]
        assert {h["Gateway-Event-Id"] for _, h, _ in messages} == {
            f"evt_lost_{i}" for i in range(5)
        }

        # 3. A second pass before the worker runs publishes again (a new id, not deduplicated);
        #    the ledger's idempotency keeps it to one transfer each.
        again = await run_reconcile(settings, older_than_s=0)
        assert again.republished == 5 and again.run_id != report.run_id
        async with running_worker(doc):
            await wait_until(
                lambda: scalar(
                    database_url, "SELECT count(*) = 6 FROM settlements WHERE state = 'settled'"
                ),
                timeout_s=30,
            )
            await asyncio.sleep(1.0)  # let the repeats be processed too
    transfers = await fetch(database_url, "SELECT settlement_id FROM ledger_transfers")
    assert sorted(r[0] for r in transfers) == sorted(
        ["pi_early", *(f"pi_lost_{i}" for i in range(5))]
    )
    done = await run_reconcile(settings, older_than_s=0)
    assert (done.scanned, done.settled, done.republished) == (6, 6, 0)


async def test_manually_resolved_dead_letters_are_left_alone(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    settings = settings_mod.parse(doc, env={})
    async with running_server(doc) as server:
        await post(server, "evt_m", payment("evt_m", "pi_m"))
        await post(server, "evt_r", payment("evt_r", "pi_r"))
        await wait_until(lambda: all_published(database_url))
    conn = await asyncpg.connect(database_url)
    try:
        for event_id, resolution in (("evt_m", "manual"), ("evt_r", "replayed")):
            await conn.execute(
                "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
                " payload, is_resolved, resolved_at, resolution)"
                " VALUES ('settlement', 'stripe', $1, 'X', 'x', '', true, now(), $2)",
                event_id,
                resolution,
            )
    finally:
        await conn.close()
    report = await run_reconcile(settings, older_than_s=0, dry_run=True)
    # An operator's decision is an outcome; a replay that did not settle is not.
    assert report.events == ["stripe:evt_r"]


async def test_cli_reports_as_json(tmp_path: Path, doc: dict[str, Any], database_url: str) -> None:
    async with running_server(doc) as server:
        await post(server, "evt_cli", payment("evt_cli", "pi_cli"))
        await wait_until(lambda: all_published(database_url))
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(toml(doc), encoding="utf-8")
    parser = cli.build_parser()
    args = parser.parse_args(["reconcile", "--config", str(cfg), "--older-than-s", "0", "--json"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = await asyncio.to_thread(args.func, args)
    assert status == 0
    assert orjson.loads(out.getvalue())["events"] == ["stripe:evt_cli"]
    # Out of range is argparse's usage error, before anything connects.
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(["reconcile", "--config", str(cfg), "--older-than-s", "-1"])
    assert refused.value.code == 2


def toml(doc: dict[str, Any]) -> str:
    """The config as TOML (two levels of tables, as the gateway's has)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return orjson.dumps(v).decode() if isinstance(v, str) else str(v)

    lines: list[str] = []
    for section, values in doc.items():
        lines.append(f"[{section}]")
        for key, v in values.items():
            if not isinstance(v, dict):
                lines.append(f"{key} = {value(v)}")
        for key, v in values.items():
            if isinstance(v, dict):
                lines.append(f"[{section}.{key}]")
                lines += [f"{k} = {value(x)}" for k, x in v.items()]
    return "\n".join(lines) + "\n"


async def test_nats_unreachable_is_reported_and_nothing_is_marked(
    doc: dict[str, Any], database_url: str, nats_server: NatsServer
) -> None:
    async with running_server(doc) as server:
        await post(server, "evt_down", payment("evt_down", "pi_down"))
        await wait_until(lambda: all_published(database_url))
    nats_server.stop()
    settings = settings_mod.parse({**doc, "nats": {**doc["nats"], "request_timeout_s": 1}}, env={})
    with pytest.raises(BrokerUnavailable):
        await run_reconcile(settings, older_than_s=0)
    nats_server.start()
    report = await run_reconcile(settings, older_than_s=0)  # the next pass finds it again
    assert report.republished == 1


async def test_a_refund_that_netted_to_nothing_counts_as_settled(
    doc: dict[str, Any], database_url: str
) -> None:
    """A `charge.refunded` whose refund its `refund.created` already moved has a claim and
    no transfer: reconcile counts it settled and publishes nothing again."""
    settings = settings_mod.parse(doc, env={})
    refund = {"id": "re_1", "object": "refund", "amount": 400, "currency": "usd",
              "payment_intent": "pi_n", "status": "succeeded"}  # fmt: skip
    charge = {"id": "ch_n", "payment_intent": "pi_n", "amount_refunded": 400, "currency": "usd"}
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_rec")
        await post(server, "evt_p", payment("evt_p", "pi_n"))
        await wait_until(lambda: scalar(database_url, "SELECT count(*) FROM settlements"))
        await post(server, "evt_r", orjson.dumps(
            {"id": "evt_r", "type": "refund.created", "data": {"object": refund}}))  # fmt: skip
        await post(server, "evt_c", orjson.dumps(
            {"id": "evt_c", "type": "charge.refunded", "data": {"object": charge}}))  # fmt: skip
        await wait_until(lambda: scalar(database_url, "SELECT count(*) - 1 FROM payment_claims"))

        # The claim is written before the event is marked done: wait for the event's end
        # (under load the two can be seconds apart), which is what reconcile reads.
        async def all_three_ended() -> bool:
            found = await run_reconcile(settings, older_than_s=0, dry_run=True)
            return found.settled == 3

        await wait_until(all_three_ended)
    dry = await run_reconcile(settings, older_than_s=0, dry_run=True)
    assert (dry.scanned, dry.settled, dry.events) == (3, 3, [])
