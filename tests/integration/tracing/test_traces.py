"""One payment followed from the provider's request to the ledger: real `gateway serve`
and `gateway settle` processes export their spans over OTLP/HTTP to a receiver running
in the test, which decodes them with the official protobuf classes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support import processes
from tests.support.cli import GATEWAY, invoke
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import SECRETS, config
from tests.support.otlp import STATUS_ERROR, OtlpReceiver, ReceivedSpan, running_receiver
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_ready, wait_until
from tests.support.settlement import fetch, settlement_sections
from tests.support.stub import Stub

#: A provider's own trace header: never the parent (trust_incoming is off by default).
PROVIDERS_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SERVER, CONSUMER, PRODUCER = 2, 5, 4  # Span.SpanKind values in the protocol


def payment(event_id: str, pi: str, merchant: str, currency: str = "usd") -> bytes:
    obj = {
        "id": pi,
        "amount_received": 1250,
        "currency": currency,
        "metadata": {"merchant_id": merchant},
    }
    doc = {"id": event_id, "type": "payment_intent.succeeded", "data": {"object": obj}}
    return orjson.dumps(doc)


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in clean_env().items() if not k.startswith("OTEL_")}
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"  # export within 0.1 s, so the test waits little
    with log.open("wb") as out:
        return subprocess.Popen([GATEWAY, *args], env=env, stdout=out, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> None:
    processes.stop(process, 20)


def log_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            lines.append(orjson.loads(line))
    return lines


class Run:
    """serve and settle, with tracing on, against one receiver."""

    def __init__(self, receiver: OtlpReceiver, port: int, logs: tuple[Path, Path]) -> None:
        self.receiver = receiver
        self.url = f"http://127.0.0.1:{port}"
        self.serve_log, self.settle_log = logs

    async def send(self, event_id: str, body: bytes, **headers: str) -> None:
        sent = deliver("stripe", event_id, "payment_intent.succeeded", body=body)
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            answer = await client.post(
                sent.path, content=sent.body, headers={**sent.headers, **headers}
            )
        assert answer.status_code == 200, answer.text

    async def request_span(self, event_id: str) -> ReceivedSpan:
        """The request's span, once exported (serve and settle export independently)."""
        [span] = await self.receiver.wait_for(
            lambda s: s.kind == SERVER and s.attributes.get("gateway.event_id") == event_id
        )
        return span

    def trace(self, trace_id: str) -> dict[str, list[ReceivedSpan]]:
        by_name: dict[str, list[ReceivedSpan]] = {}
        for span in self.receiver.where(lambda s: s.trace_id == trace_id):
            by_name.setdefault(span.name, []).append(span)
        return by_name


@pytest.fixture
async def run(tmp_path: Path, database_url: str, nats_url: str, stub: Stub, redis_url: str) -> Any:
    async with running_receiver() as receiver:
        port = free_port()
        sections = settlement_sections(stub.url, redis_url)
        # The second currency retry waits 3 s: time for the test to mend the stub.
        sections["currency"]["retry_delays_s"] = [0.2, 3.0, 3.0]
        doc = config(
            database_url,
            nats_url,
            **sections,
            http={"port": port},
            tracing={"endpoint": receiver.url},
        )
        cfg = str(write_toml(tmp_path / "gateway.toml", doc))
        # In this process, with the environment inherited as before (not clean_env()).
        opened = invoke("ledger", "--config", cfg, "open-account", "m_trace", env=os.environ)
        assert opened.returncode == 0, opened.stderr
        logs = (tmp_path / "serve.log", tmp_path / "settle.log")
        serve = start(["serve", "--config", cfg, "--log-level", "debug"], logs[0])
        settle = start(["settle", "--config", cfg], logs[1])
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                await wait_ready(client)
            yield Run(receiver, port, logs)
        finally:
            stop(serve)
            stop(settle)


def one(spans: dict[str, list[ReceivedSpan]], name: str) -> ReceivedSpan:
    found = spans.get(name, [])
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


async def test_one_payment_is_one_trace_from_request_to_ledger(run: Run) -> None:
    """request -> commit wait, request -> publish -> settlement -> currency and ledger,
    across the serving and the settling process, with the right parents; the provider's
    own traceparent is a link, not the parent; the log lines of both processes carry
    the trace id; and no attribute holds the body, the signature or a secret."""
    await run.send(
        "evt_trace_ok", payment("evt_trace_ok", "pi_ok", "m_trace"),
        traceparent=PROVIDERS_TRACEPARENT,
    )  # fmt: skip
    # The settle span ends last (after the ack), and may be exported after its children.
    await run.receiver.wait_for(
        lambda s: s.name == "settle" and s.attributes.get("gateway.event_id") == "evt_trace_ok"
    )
    request = await run.request_span("evt_trace_ok")
    assert request.name == "POST /webhooks/{provider}"
    assert request.parent_span_id == ""  # a new trace: the provider's is not trusted
    assert request.trace_id != PROVIDERS_TRACEPARENT.split("-")[1]
    assert request.links == (tuple(PROVIDERS_TRACEPARENT.split("-")[1:3]),)
    assert request.attributes["gateway.provider"] == "stripe"
    assert request.attributes["gateway.event_type"] == "payment_intent.succeeded"
    assert request.attributes["gateway.outcome"] == "accepted"
    assert request.attributes["http.response.status_code"] == 200

    # Each process exports its spans in its own batches: under load the serving
    # process's publish span can arrive after the settling process's settle span.
    wanted = ("commit.wait", "publish", "settle", "ledger.post", "currency.rate")
    await run.receiver.wait_for(
        lambda s: s.trace_id == request.trace_id and s.name in wanted, count=len(wanted)
    )
    spans = run.trace(request.trace_id)
    commit, publish = one(spans, "commit.wait"), one(spans, "publish")
    settle, ledger = one(spans, "settle"), one(spans, "ledger.post")
    currency = one(spans, "currency.rate")
    assert commit.parent_span_id == request.span_id
    assert publish.parent_span_id == request.span_id and publish.kind == PRODUCER
    assert publish.attributes["gateway.outcome"] == "published"
    assert settle.parent_span_id == publish.span_id and settle.kind == CONSUMER
    assert settle.attributes["gateway.outcome"] == "settled"
    assert settle.attributes["gateway.attempt"] == 1
    assert ledger.parent_span_id == settle.span_id
    assert currency.parent_span_id == settle.span_id
    assert currency.attributes["gateway.rate.source"] == "identity"  # USD to a USD ledger
    assert {s.service for s in (request, commit, publish)} == {"gateway-serve"}
    assert {s.service for s in (settle, ledger, currency)} == {"gateway-settle"}

    texts = [str(v) for s in run.receiver.spans for v in s.attributes.values()]
    assert not [t for t in texts if "pi_ok" in t or SECRETS["stripe"] in t or "v1=" in t]

    async def logs_joined() -> bool:
        serve = [x for x in log_lines(run.serve_log) if x.get("event_id") == "evt_trace_ok"]
        settled = [x for x in log_lines(run.settle_log) if x.get("settlement_id") == "pi_ok"]
        return bool(serve and settled) and all(
            x.get("trace_id") == request.trace_id for x in serve + settled
        )

    await wait_until(logs_joined, timeout_s=10)


async def test_a_parked_event_and_a_retried_one_show_in_their_traces(run: Run, stub: Stub) -> None:
    """A payment for a merchant without an account is parked: its settlement span and
    the parking carry the error class. A payment whose rate is unavailable twice shows
    three attempts in its trace: two retried, one settled."""
    await run.send("evt_trace_parked", payment("evt_trace_parked", "pi_parked", "m_nobody"))
    [parked] = await run.receiver.wait_for(lambda s: s.name == "dlq.park")
    request = await run.request_span("evt_trace_parked")
    spans = run.trace(request.trace_id)
    settle = one(spans, "settle")
    assert parked.trace_id == request.trace_id and parked.parent_span_id == settle.span_id
    for span in (settle, parked):
        assert span.attributes["gateway.error_class"] == "UNKNOWN_MERCHANT"
        assert span.status_code == STATUS_ERROR
    assert settle.attributes["gateway.outcome"] == "dead_letter"

    await stub.control(mode="fail")
    await run.send("evt_trace_retry", payment("evt_trace_retry", "pi_retry", "m_trace", "eur"))

    def retried(s: ReceivedSpan) -> bool:
        return s.name == "settle" and s.attributes.get("gateway.outcome") == "retry"

    await run.receiver.wait_for(retried, count=2)
    await stub.control(mode="ok")
    await run.receiver.wait_for(
        lambda s: s.name == "settle" and s.attributes.get("gateway.outcome") == "settled"
        and s.attributes.get("gateway.event_id") == "evt_trace_retry"
    )  # fmt: skip
    retry_request = await run.request_span("evt_trace_retry")
    attempts = sorted(
        run.trace(retry_request.trace_id)["settle"],
        key=lambda s: int(s.attributes["gateway.attempt"]),
    )
    assert [
        (s.attributes["gateway.attempt"], s.attributes["gateway.outcome"]) for s in attempts
    ] == [
        (1, "retry"),
        (2, "retry"),
        (3, "settled"),
    ]
    assert attempts[0].attributes["gateway.error_class"] == "RATE_UNAVAILABLE"
    assert len({s.parent_span_id for s in attempts}) == 1  # every attempt: the same publish
    # Each attempt looked the rate up: two failed, the last found it at the service.
    looked_up = {s.parent_span_id: s for s in run.trace(retry_request.trace_id)["currency.rate"]}
    rates = [looked_up[s.span_id] for s in attempts]
    assert [r.attributes.get("gateway.rate.source") for r in rates] == [None, None, "service"]
    assert [r.attributes.get("gateway.error_class") for r in rates[:2]] == ["RATE_UNAVAILABLE"] * 2


async def test_an_event_published_later_by_the_relay_joins_its_requests_trace(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """`[outbox] inline = false`: serve only records; a `gateway relay` process publishes
    the row later, and its publish span is still the request's child (the traceparent
    stored with the row), exported as gateway-relay; the relay's debug line for the
    event carries the publish span's trace and span ids."""
    async with running_receiver() as receiver:
        port = free_port()
        doc = config(
            database_url,
            nats_url,
            http={"port": port},
            outbox={"inline": False},
            tracing={"endpoint": receiver.url},
        )
        cfg = str(write_toml(tmp_path / "gateway.toml", doc))
        serve = start(["serve", "--config", cfg], tmp_path / "serve.log")
        relay = None
        try:
            run = Run(receiver, port, (tmp_path / "serve.log", tmp_path / "relay.log"))
            async with httpx.AsyncClient(base_url=run.url) as client:
                await wait_ready(client)
            await run.send("evt_trace_relay", payment("evt_trace_relay", "pi_relay", "m_x"))
            request = await run.request_span("evt_trace_relay")
            rows = await fetch(database_url, "SELECT traceparent FROM processed_webhooks")
            assert [r["traceparent"].split("-")[1:3] for r in rows] == [
                [request.trace_id, request.span_id]
            ]
            relay_log = tmp_path / "relay.log"
            relay = start(["relay", "--config", cfg, "--log-level", "debug"], relay_log)
            [publish] = await receiver.wait_for(lambda s: s.name == "publish")

            def published_lines() -> list[dict[str, Any]]:
                return [
                    x
                    for x in log_lines(relay_log)
                    if x.get("event_id") == "evt_trace_relay" and x.get("msg") == "event published"
                ]

            async def logged() -> bool:
                return bool(published_lines())

            await wait_until(logged, timeout_s=10)
        finally:
            stop(serve)
            if relay is not None:
                stop(relay)
    assert (publish.trace_id, publish.parent_span_id) == (request.trace_id, request.span_id)
    assert publish.service == "gateway-relay"
    assert publish.attributes["gateway.publish.path"] == "relay"
    assert publish.attributes["gateway.outcome"] == "published"
    # The relay's log line joins the trace: written inside its publish span.
    [line] = published_lines()
    assert (line["trace_id"], line["span_id"]) == (publish.trace_id, publish.span_id)
    assert line["path"] == "relay"
