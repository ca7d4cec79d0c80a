"""Both ingestion endpoints, through the real `GatewayApp` and its lifespan, with the
ports faked in memory (`tests.support.fakes`): every answer the README's HTTP API
defines, and the `gateway_webhooks_total` / `gateway_request_seconds` /
`gateway_dlq_total` samples each one leaves in `/metrics`.

Requests are driven as plain ASGI, each in its own task as a server runs them, so the
gateway's deadline sweeper cancels the request and not the test. Signatures come from
the independent signers in `tests.support.vectors`, never from `gateway`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from starlette.types import ASGIApp, Message, Scope

from gateway.errors import DatabaseError, DatabaseUnavailable, Overloaded, TransientError
from gateway.ingest.app import GatewayApp
from gateway.ingest.parts import IngestParts
from gateway.metrics import Metrics
from gateway.settings import Settings, parse
from tests.support import vectors
from tests.support.config_file import REQUIRED_URLS
from tests.support.fakes import MemoryInbox, StaticProbe

STRIPE_SECRET = "whsec_unit_stripe_secret"
STANDARD_SECRET = "whsec_" + base64.b64encode(b"unit-standard-key-0123456789abcd").decode()
BILLING_TOKEN = "billing-unit-token"
AUDIT_TOKEN = "audit-unit-token"
MAX_BODY_BYTES = 1024
RETRY_AFTER_S = 7
#: Short deadlines for the tests that wait for one (the sweeper ticks every 0.1 s).
SHORT_S = 0.05


def make_settings(request_timeout_s: float = 10.0, commit_timeout_s: float = 5.0) -> Settings:
    return parse(
        {
            **REQUIRED_URLS,
            "http": {
                "max_body_bytes": MAX_BODY_BYTES,
                "retry_after_s": RETRY_AFTER_S,
                "request_timeout_s": request_timeout_s,
            },
            "ingest": {"commit_timeout_s": commit_timeout_s},
            "providers": {
                "stripe": {"scheme": "stripe", "secrets": [STRIPE_SECRET]},
                "standard": {"scheme": "standard", "secrets": [STANDARD_SECRET]},
            },
            "services": {
                "billing": {"token": BILLING_TOKEN, "subjects": ["events.billing.>"]},
                "audit": {"token": AUDIT_TOKEN, "subjects": ["events.audit.login.*"]},
            },
        },
        env={},
    )


# --- driving the ASGI application ---------------------------------------------------------

#: How the client's side of the body ends: sent whole, hung up, or never finished.
End = Literal["complete", "disconnect", "stall"]


@dataclass
class Answer:
    """What the application sent back, and how many times it read from the client."""

    status: int | None = None  # None: nothing was sent
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    reads: int = 0

    def json(self) -> Any:
        return json.loads(self.body)


def http_scope(method: str, path: str, headers: Mapping[str, str]) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
        "state": {},
    }


def start(
    app: ASGIApp,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    chunks: Sequence[bytes] = (b"",),
    end: End = "complete",
) -> tuple[asyncio.Task[None], Answer]:
    """Run one request in a task of its own; the answer fills in as the app sends it."""
    answer = Answer()
    pending: list[Message] = [
        {"type": "http.request", "body": c, "more_body": end != "complete" or i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]

    async def receive() -> Message:
        answer.reads += 1
        if pending:
            return pending.pop(0)
        if end == "stall":
            await asyncio.Event().wait()  # the rest never comes; only a deadline ends this
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    async def run() -> None:
        await app(http_scope(method, path, headers or {}), receive, send)

    return asyncio.create_task(run()), answer


async def call(
    app: ASGIApp,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    chunks: Sequence[bytes] = (b"",),
    end: End = "complete",
) -> Answer:
    task, answer = start(app, method, path, headers, chunks, end)
    await asyncio.wait_for(task, 5)  # a hung request fails its test instead of the run
    return answer


@contextlib.asynccontextmanager
async def lifespan(app: ASGIApp) -> AsyncIterator[None]:
    """Start and stop the application through the ASGI lifespan protocol, as uvicorn does."""
    to_app: asyncio.Queue[Message] = asyncio.Queue()
    from_app: asyncio.Queue[Message] = asyncio.Queue()
    scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}

    async def run() -> None:
        await app(scope, to_app.get, from_app.put)

    task = asyncio.create_task(run())
    await to_app.put({"type": "lifespan.startup"})
    started = await asyncio.wait_for(from_app.get(), 5)
    if started["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"start-up failed: {started}")
    try:
        yield
    finally:
        await to_app.put({"type": "lifespan.shutdown"})
        stopped = await asyncio.wait_for(from_app.get(), 5)
        await asyncio.wait_for(task, 5)
        if stopped["type"] != "lifespan.shutdown.complete":
            raise RuntimeError(f"shutdown failed: {stopped}")


@dataclass
class Gateway:
    """A `GatewayApp` whose parts are fakes the test can set up and inspect."""

    settings: Settings
    inbox: MemoryInbox = field(default_factory=MemoryInbox)
    database: StaticProbe = field(default_factory=StaticProbe)
    broker: StaticProbe = field(default_factory=StaticProbe)
    metrics: Metrics = field(default_factory=Metrics)
    app: GatewayApp = field(init=False)

    def __post_init__(self) -> None:
        @contextlib.asynccontextmanager
        async def run_parts(settings: Settings) -> AsyncIterator[IngestParts]:
            try:
                yield IngestParts(
                    settings.http,
                    settings.ingest,
                    settings.tracing,
                    self.inbox,
                    self.database,
                    self.broker,
                    self.metrics,
                )
            finally:
                await self.inbox.close()

        self.app = GatewayApp(self.settings, run_parts)

    def webhooks_total(self) -> dict[tuple[str, str], float]:
        """`gateway_webhooks_total` as rendered: (provider, outcome) -> count."""
        return {
            (labels["provider"], labels["outcome"]): value
            for labels, value in samples(self.metrics.render(), "gateway_webhooks_total")
        }

    def dlq_total(self) -> dict[tuple[str, str], float]:
        """`gateway_dlq_total` as rendered: (stage, error_class) -> count."""
        return {
            (labels["stage"], labels["error_class"]): value
            for labels, value in samples(self.metrics.render(), "gateway_dlq_total")
        }

    def requests_timed(self) -> float:
        """How many requests `gateway_request_seconds` observed (its `_count`)."""
        found = samples(self.metrics.render(), "gateway_request_seconds_count")
        return sum(value for _, value in found)


_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(rendered: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of metric `name` in a Prometheus text exposition."""
    found = []
    for line in rendered.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            found.append((dict(_LABEL.findall(match.group(2) or "")), float(match.group(3))))
    return found


@pytest.fixture
async def gw() -> AsyncIterator[Gateway]:
    gateway = Gateway(make_settings())
    async with lifespan(gateway.app):
        yield gateway


# --- signed requests -----------------------------------------------------------------------

Request = tuple[str, dict[str, str], list[bytes]]  # path, headers, body chunks


def now_s() -> int:
    return int(time.time())


def whole(path: str, headers: dict[str, str], body: bytes) -> Request:
    """A request whose body is sent in one piece with its Content-Length."""
    return (
        path,
        {"content-type": "application/json", **headers, "content-length": str(len(body))},
        [body],
    )


def stripe(
    body: bytes, *, secret: str = STRIPE_SECRET, ts: int | None = None, path: str = ""
) -> Request:
    ts = now_s() if ts is None else ts
    signature = f"t={ts},v1={vectors.stripe_v1(secret, ts, body)}"
    return whole(path or "/webhooks/stripe", {"stripe-signature": signature}, body)


def standard(body: bytes, msg_id: str) -> Request:
    ts = now_s()
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": "v1," + vectors.standard_v1(STANDARD_SECRET, msg_id, ts, body),
    }
    return whole("/webhooks/standard", headers, body)


def event(body: bytes, *, key: str | None = "key-1", token: str | None = BILLING_TOKEN) -> Request:
    headers = {}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if key is not None:
        headers["idempotency-key"] = key
    return whole("/v1/events", headers, body)


def with_headers(request: Request, **changes: str | None) -> Request:
    """`request` with headers replaced (a value) or removed (None); `_` in names is `-`."""
    path, headers, chunks = request
    headers = dict(headers)
    for name, value in changes.items():
        headers.pop(name.replace("_", "-"), None)
        if value is not None:
            headers[name.replace("_", "-")] = value
    return path, headers, chunks


async def post(gw: Gateway, request: Request, end: End = "complete") -> Answer:
    path, headers, chunks = request
    return await call(gw.app, "POST", path, headers, chunks, end)


STRIPE_BODY = b'{"id": "evt_1", "type": "payment_intent.succeeded", "data": {}}'
EVENT_BODY = b'{"type": "payment.captured", "data": {"settlement_id": "s_1"}}'
OVERSIZED = b'{"id": "evt_big", "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'


# --- 200: accepted and duplicate -----------------------------------------------------------

ACCEPTABLE = [
    pytest.param(lambda: stripe(STRIPE_BODY), "stripe", "evt_1", id="stripe-webhook"),
    pytest.param(
        lambda: standard(b'{"type": "invoice.paid"}', "msg_1"), "standard", "msg_1", id="standard"
    ),
    pytest.param(lambda: event(EVENT_BODY, key="key-1"), "internal", "key-1", id="v1-events"),
]


@pytest.mark.parametrize(("request_of", "label", "event_id"), ACCEPTABLE)
async def test_a_new_event_is_accepted_then_its_repeat_is_a_duplicate(
    gw: Gateway, request_of: Callable[[], Request], label: str, event_id: str
) -> None:
    """The first delivery is recorded and answered accepted; the same again is answered
    duplicate and records nothing more; each is counted and timed under its label."""
    first = await post(gw, request_of())
    assert (first.status, first.json()) == (200, {"status": "accepted", "event_id": event_id})
    assert first.headers["content-type"] == "application/json"
    assert len(gw.inbox.recorded) == 1
    again = await post(gw, request_of())
    assert (again.status, again.json()) == (200, {"status": "duplicate", "event_id": event_id})
    assert len(gw.inbox.recorded) == 1
    assert gw.webhooks_total() == {(label, "accepted"): 1, (label, "duplicate"): 1}
    assert gw.requests_timed() == 2
    assert gw.dlq_total() == {}


async def test_an_internal_event_is_recorded_under_its_service_and_subject(gw: Gateway) -> None:
    """`/v1/events` records the publisher's event under `service:{name}` with the subject
    `events.{service}.{type}`, and never stores the bearer token."""
    await post(gw, event(EVENT_BODY, key="s_1"))
    (recorded,) = gw.inbox.recorded.values()
    assert (recorded.provider, recorded.event_id) == ("service:billing", "s_1")
    assert recorded.subject == "events.billing.payment.captured"
    assert recorded.body == EVENT_BODY
    assert "authorization" not in recorded.headers


async def test_the_same_event_id_from_two_providers_is_two_events(gw: Gateway) -> None:
    """Idempotency is per (provider, event id): one id from two senders is two events."""
    first = await post(gw, standard(b'{"type": "t"}', "evt_1"))
    second = await post(gw, stripe(STRIPE_BODY))  # also evt_1
    assert [first.json()["status"], second.json()["status"]] == ["accepted", "accepted"]


# --- 4xx: refused, nothing reaches the inbox -------------------------------------------------


def streamed(request: Request, size: int = 600) -> Request:
    """The same request sent in pieces, without a Content-Length."""
    path, headers, chunks = request
    body = b"".join(chunks)
    headers = {k: v for k, v in headers.items() if k != "content-length"}
    return path, headers, [body[i : i + size] for i in range(0, len(body), size)]


def tampered(request: Request) -> Request:
    """The same signed headers over a body changed by one byte."""
    path, headers, chunks = request
    body = b"".join(chunks).replace(b'"data": {}', b'"data": {} ')
    return path, {**headers, "content-length": str(len(body))}, [body]


# (request, status, outcome label, provider label, refused before reading the body)
REFUSED = [
    # 401: signatures (webhooks)
    # 401: a signature header missing or blank, refused before the body is read
    pytest.param(
        lambda: with_headers(stripe(STRIPE_BODY), stripe_signature=None),
        401, "signature_missing", "stripe", True, id="signature-missing",
    ),
    pytest.param(
        lambda: with_headers(stripe(STRIPE_BODY), stripe_signature="  "),
        401, "signature_missing", "stripe", True, id="signature-blank",
    ),
    pytest.param(
        lambda: with_headers(stripe(STRIPE_BODY), stripe_signature="t=soon,v1=00"),
        401, "signature_malformed", "stripe", False, id="signature-malformed",
    ),
    pytest.param(
        lambda: stripe(STRIPE_BODY, secret="whsec_someone_else"),
        401, "signature_mismatch", "stripe", False, id="signature-wrong-secret",
    ),
    pytest.param(
        lambda: tampered(stripe(STRIPE_BODY)),
        401, "signature_mismatch", "stripe", False, id="body-changed-after-signing",
    ),
    pytest.param(
        lambda: stripe(STRIPE_BODY, ts=now_s() - 3600),
        401, "timestamp_out_of_window", "stripe", False, id="signature-stale",
    ),
    pytest.param(
        lambda: with_headers(standard(b'{"type": "t"}', "msg_1"), webhook_signature=None),
        401, "signature_missing", "standard", True, id="standard-signature-missing",
    ),
    pytest.param(
        lambda: with_headers(standard(b'{"type": "t"}', "msg_1"), webhook_id=None),
        401, "signature_missing", "standard", True, id="standard-id-missing",
    ),
    pytest.param(
        lambda: with_headers(standard(b'{"type": "t"}', "msg_1"), webhook_timestamp=None),
        401, "signature_missing", "standard", True, id="standard-timestamp-missing",
    ),
    # 401: bearer tokens (/v1/events), checked before the body is read
    pytest.param(
        lambda: event(EVENT_BODY, token=None),
        401, "unauthorized", "internal", True, id="bearer-missing",
    ),
    pytest.param(
        lambda: event(EVENT_BODY, token="not-a-token"),
        401, "unauthorized", "internal", True, id="bearer-unknown",
    ),
    pytest.param(
        lambda: with_headers(event(EVENT_BODY), authorization=f"Basic {BILLING_TOKEN}"),
        401, "unauthorized", "internal", True, id="bearer-wrong-scheme",
    ),
    # 403: a subject outside the service's scope
    pytest.param(
        lambda: event(EVENT_BODY, token=AUDIT_TOKEN),
        403, "forbidden", "internal", False, id="subject-out-of-scope",
    ),
    # 404: unknown provider, refused before the body is read
    pytest.param(
        lambda: stripe(STRIPE_BODY, path="/webhooks/nosuch"),
        404, "unknown_provider", "unknown", True, id="unknown-provider",
    ),
    # 413: by Content-Length (nothing read) and by the streamed body itself
    pytest.param(
        lambda: stripe(OVERSIZED), 413, "body_too_large", "stripe", True, id="too-large-declared",
    ),
    pytest.param(
        lambda: streamed(stripe(OVERSIZED)),
        413, "body_too_large", "stripe", False, id="too-large-streamed",
    ),
    pytest.param(
        lambda: event(b'{"type": "t", "data": {}, "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'),
        413, "body_too_large", "internal", True, id="v1-events-too-large",
    ),
    # 400: the internal request is malformed (a webhook without a usable id is parked)
    pytest.param(
        lambda: event(EVENT_BODY, key=None),
        400, "event_id_missing", "internal", False, id="idempotency-key-missing",
    ),
    pytest.param(
        lambda: event(b"{not json", key="k"),
        400, "bad_request", "internal", False, id="v1-events-unparseable",
    ),
    pytest.param(
        lambda: event(b'{"data": {}}', key="k"),
        400, "bad_request", "internal", False, id="v1-events-type-missing",
    ),
    # 400: content a webhook would be parked for is the internal publisher's to fix
    pytest.param(
        lambda: event(b'{"type": "payment.\\u0000captured", "data": {}}', key="k"),
        400, "bad_request", "internal", False, id="v1-events-type-nul",
    ),
    pytest.param(
        lambda: event(b'{"type": "payment.captured\\r\\nX-Evil: 1", "data": {}}', key="k"),
        400, "bad_request", "internal", False, id="v1-events-type-crlf",
    ),
    pytest.param(
        lambda: event(EVENT_BODY, key="k\x00"),
        400, "bad_request", "internal", False, id="v1-events-key-nul",
    ),
    pytest.param(
        lambda: with_headers(event(EVENT_BODY, key="k"), traceparent="a\x00b"),
        400, "bad_request", "internal", False, id="v1-events-header-nul",
    ),
    pytest.param(
        lambda: event(b"\xef\xbb\xbf" + EVENT_BODY, key="k"),
        400, "bad_request", "internal", False, id="v1-events-bom",
    ),
    pytest.param(
        lambda: event(b'{"type": "t", "data": {"amount": 1e400}}', key="k"),
        400, "bad_request", "internal", False, id="v1-events-number-infinite",
    ),
    pytest.param(
        lambda: event(b'{"type": "t", "data": {"name": "\\ud800"}}', key="k"),
        400, "bad_request", "internal", False, id="v1-events-lone-surrogate",
    ),
    pytest.param(
        lambda: event(b'{"type": "t", "data": [1]}', key="k"),
        400, "bad_request", "internal", False, id="v1-events-data-not-object",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("request_of", "status", "outcome", "label", "unread"), REFUSED)
async def test_a_refused_request_stores_nothing(
    gw: Gateway,
    request_of: Callable[[], Request],
    status: int,
    outcome: str,
    label: str,
    unread: bool,
) -> None:
    """Each refusal gets its status and error class, never reaches the inbox, and is
    counted once under its provider label (`unknown` for any unconfigured name)."""
    answer = await post(gw, request_of())
    assert answer.status == status
    assert answer.json()["error"] == outcome
    assert gw.inbox.offered == []
    if unread:  # refused from the headers alone: not a byte of the body was read
        assert answer.reads == 0
    assert gw.webhooks_total() == {(label, outcome): 1}
    assert gw.requests_timed() == 1


@pytest.mark.parametrize(
    "request_of",
    [
        lambda: with_headers(stripe(STRIPE_BODY), stripe_signature=None),
        lambda: with_headers(standard(b'{"type": "t"}', "msg_1"), webhook_timestamp=None),
    ],
    ids=["stripe", "standard"],
)
async def test_a_request_without_its_signature_header_is_refused_without_its_body(
    gw: Gateway, request_of: Callable[[], Request]
) -> None:
    """A sender that never finishes its body is answered 401 at once when a required
    signature header is missing, not after `request_timeout_s` (10 s here) as a 400."""
    path, headers, _ = request_of()
    answer = await call(gw.app, "POST", path, headers, [b'{"id": '], end="stall")
    assert answer.status == 401
    assert answer.json()["error"] == "signature_missing"
    assert answer.reads == 0
    assert gw.inbox.offered == []


async def test_an_unknown_provider_name_is_echoed_cut_short(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """A 60 KB provider name costs a small 404 and a short log line, not 60 KB of each;
    a short name is repeated whole so a typo can be spotted."""
    long_name = "n" * 60_000
    caplog.set_level("INFO", logger="gateway.ingest.endpoints")
    answer = await post(gw, stripe(STRIPE_BODY, path="/webhooks/" + long_name))
    assert answer.status == 404
    assert len(answer.body) < 200
    assert answer.json()["detail"].startswith("no provider named 'nnnn")
    (record,) = [r for r in caplog.records if r.getMessage() == "request rejected"]
    assert len(str(record.__dict__)) < 2_000
    short = await post(gw, stripe(STRIPE_BODY, path="/webhooks/strpie"))
    assert short.json()["detail"] == "no provider named 'strpie' is configured"
    assert gw.webhooks_total() == {("unknown", "unknown_provider"): 2}


async def test_a_body_not_received_in_time_is_a_400() -> None:
    """A client that stops sending mid-body is answered 400 once `request_timeout_s`
    passes, and nothing reaches the inbox."""
    gw = Gateway(make_settings(request_timeout_s=SHORT_S))
    async with lifespan(gw.app):
        path, headers, _ = stripe(STRIPE_BODY)
        answer = await call(gw.app, "POST", path, headers, [STRIPE_BODY[:10]], end="stall")
    assert answer.status == 400
    assert answer.json() == {"error": "bad_request", "detail": "request body not received in time"}
    assert gw.inbox.offered == []
    assert gw.webhooks_total() == {("stripe", "bad_request"): 1}
    assert gw.requests_timed() == 1


@pytest.mark.parametrize(
    "request_of",
    [lambda: stripe(STRIPE_BODY), lambda: event(EVENT_BODY)],
    ids=["webhook", "v1-events"],
)
async def test_a_client_gone_before_its_body_is_not_answered(
    gw: Gateway, request_of: Callable[[], Request]
) -> None:
    """A client that disconnects mid-body gets no answer, stores nothing, and is counted
    as `client_disconnect`."""
    path, headers, chunks = request_of()
    answer = await call(gw.app, "POST", path, headers, [chunks[0][:10]], end="disconnect")
    assert answer.status is None and answer.body == b""
    assert gw.inbox.offered == []
    label = "internal" if path == "/v1/events" else "stripe"
    assert gw.webhooks_total() == {(label, "client_disconnect"): 1}
    assert gw.requests_timed() == 1


# --- 5xx: the event could not be made durable, or a bug -------------------------------------


@pytest.mark.parametrize(
    "error", [DatabaseUnavailable("connection refused"), Overloaded("queue full")]
)
@pytest.mark.parametrize(
    ("request_of", "label"),
    [(lambda: stripe(STRIPE_BODY), "stripe"), (lambda: event(EVENT_BODY), "internal")],
    ids=["webhook", "v1-events"],
)
async def test_a_transient_inbox_failure_is_a_503_with_retry_after(
    gw: Gateway, error: TransientError, request_of: Callable[[], Request], label: str
) -> None:
    """When the inbox cannot make the event durable the sender is told to retry later
    (503 with `Retry-After`), and a retry once it recovers is accepted."""
    gw.inbox.fail_with(error)
    answer = await post(gw, request_of())
    assert answer.status == 503
    assert answer.headers["retry-after"] == str(RETRY_AFTER_S)
    assert answer.json()["error"] == "unavailable"
    assert gw.inbox.recorded == {}
    gw.inbox.fail_with(None)
    assert (await post(gw, request_of())).json()["status"] == "accepted"
    assert gw.webhooks_total() == {(label, "unavailable"): 1, (label, "accepted"): 1}
    assert gw.requests_timed() == 2


async def test_a_commit_past_its_deadline_is_a_503_with_retry_after() -> None:
    """An inbox that does not answer within `commit_timeout_s` is a 503 the sender
    retries, never a 2xx."""
    gw = Gateway(make_settings(commit_timeout_s=SHORT_S))
    gw.inbox.stall()
    async with lifespan(gw.app):
        answer = await post(gw, stripe(STRIPE_BODY))
    assert answer.status == 503
    assert answer.headers["retry-after"] == str(RETRY_AFTER_S)
    assert len(gw.inbox.offered) == 1 and gw.inbox.recorded == {}
    assert gw.webhooks_total() == {("stripe", "unavailable"): 1}
    assert gw.requests_timed() == 1


async def test_a_request_cancelled_by_shutdown_is_not_mistaken_for_a_deadline(
    gw: Gateway,
) -> None:
    """A cancellation that is not the request's deadline (the server stopping) is passed
    on, not turned into an answer."""
    gw.inbox.stall()
    path, headers, chunks = stripe(STRIPE_BODY)
    task, answer = start(gw.app, "POST", path, headers, chunks)
    while not gw.inbox.offered:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert answer.status is None
    assert gw.webhooks_total() == {}


@pytest.mark.parametrize(
    ("request_of", "label"),
    [(lambda: stripe(STRIPE_BODY), "stripe"), (lambda: event(EVENT_BODY), "internal")],
    ids=["webhook", "v1-events"],
)
async def test_an_unexpected_inbox_error_is_a_500(
    gw: Gateway, request_of: Callable[[], Request], label: str
) -> None:
    """A bug behind the inbox is a 500 without details, counted as `error`."""
    gw.inbox.fail_with(RuntimeError("bug in the inbox"))
    answer = await post(gw, request_of())
    assert answer.status == 500
    assert answer.json() == {"error": "internal", "detail": "unexpected error"}
    assert "retry-after" not in answer.headers
    assert gw.webhooks_total() == {(label, "error"): 1}
    assert gw.requests_timed() == 1


@pytest.mark.parametrize(
    ("request_of", "label"),
    [(lambda: stripe(STRIPE_BODY), "stripe"), (lambda: event(EVENT_BODY), "internal")],
    ids=["webhook", "v1-events"],
)
@pytest.mark.parametrize("sqlstate", ["22P05", "22021"])
async def test_content_the_database_refuses_is_a_400_never_a_500(
    gw: Gateway, request_of: Callable[[], Request], label: str, sqlstate: str
) -> None:
    """A data exception (SQLSTATE class 22) is the content's fault: 400, not 500."""
    gw.inbox.fail_with(DatabaseError(f"database error {sqlstate}", sqlstate))
    answer = await post(gw, request_of())
    assert answer.status == 400
    assert answer.json()["error"] == "bad_request"
    assert sqlstate in answer.json()["detail"]
    assert gw.webhooks_total() == {(label, "bad_request"): 1}


async def test_other_database_errors_are_still_a_500(gw: Gateway) -> None:
    """Only data exceptions are the sender's fault; a constraint we broke is our bug."""
    gw.inbox.fail_with(DatabaseError("database error 42P01", "42P01"))
    answer = await post(gw, stripe(STRIPE_BODY))
    assert answer.status == 500


# --- verified but invalid: accepted and parked in the DLQ ------------------------------------


def digest(body: bytes) -> str:
    """The id a verified body without a usable id of its own is recorded under."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


UNPARSEABLE = [
    b"not json at all",
    b'\xef\xbb\xbf{"id": "evt_bom", "type": "t"}',  # a byte order mark
    b'{"id": "evt_inf", "type": "t", "amount": 1e400}',
    b'{"id": "evt_sur", "type": "t", "name": "\\udc00"}',  # a lone surrogate escape
]

PARKED = [
    *[
        pytest.param(
            lambda body=body: stripe(body), digest(body), "stripe", "PAYLOAD_NOT_JSON",
            id=f"stripe-unparseable-{i}",
        )
        for i, body in enumerate(UNPARSEABLE)
    ],
    pytest.param(
        lambda: stripe(b'{"id": "evt_9", "type": "payment_intent.\\u0000succeeded"}'), "evt_9",
        "stripe", "EVENT_TYPE_INVALID", id="stripe-type-nul",
    ),
    pytest.param(
        lambda: stripe(b'{"id": "evt_9", "type": "charge.succeeded\\r\\nX-Evil: 1"}'), "evt_9",
        "stripe", "EVENT_TYPE_INVALID", id="stripe-type-crlf",
    ),
    pytest.param(
        lambda: stripe(b'{"id": "evt_9", "type": "' + b"t" * 201 + b'"}'), "evt_9",
        "stripe", "EVENT_TYPE_INVALID", id="stripe-type-too-long",
    ),
    pytest.param(
        lambda: stripe(b'{"id": "evt\\u0000_9", "type": "t"}'),
        digest(b'{"id": "evt\\u0000_9", "type": "t"}'), "stripe", "EVENT_ID_INVALID",
        id="stripe-id-nul",
    ),
    pytest.param(
        lambda: stripe(b'{"type": "payment_intent.succeeded"}'),
        digest(b'{"type": "payment_intent.succeeded"}'), "stripe", "EVENT_ID_INVALID",
        id="stripe-id-missing",
    ),
    pytest.param(
        lambda: stripe(b'{"id": "' + b"e" * 256 + b'", "type": "t"}'),
        digest(b'{"id": "' + b"e" * 256 + b'", "type": "t"}'), "stripe", "EVENT_ID_INVALID",
        id="stripe-id-too-long",
    ),
    pytest.param(
        lambda: standard(b'{"type": "invoice.paid"}', "m" * 256),
        digest(b'{"type": "invoice.paid"}'), "standard", "EVENT_ID_INVALID",
        id="standard-id-too-long",
    ),
    pytest.param(
        lambda: standard(b'{"type": "invoice.paid"}', "msg\t9"),
        digest(b'{"type": "invoice.paid"}'), "standard", "EVENT_ID_INVALID",
        id="standard-id-tab",
    ),
    pytest.param(
        lambda: with_headers(standard(b'{"type": "invoice.paid"}', "msg_9"), user_agent="a\x00b"),
        "msg_9", "standard", "HEADERS_INVALID", id="standard-header-nul",
    ),
    pytest.param(
        lambda: stripe(b'{"id": "evt_9", "data": {}}'), "evt_9", "stripe", "EVENT_TYPE_MISSING",
        id="stripe-type-missing",
    ),
    pytest.param(
        lambda: standard(b"<xml>not json</xml>", "msg_9"), "msg_9", "standard", "PAYLOAD_NOT_JSON",
        id="standard-not-json",
    ),
    pytest.param(
        lambda: standard(b"[1, 2]", "msg_9"), "msg_9", "standard", "PAYLOAD_NOT_OBJECT",
        id="standard-not-object",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("request_of", "event_id", "label", "error_class"), PARKED)
async def test_a_verified_event_that_fails_validation_is_accepted_and_parked(
    gw: Gateway, request_of: Callable[[], Request], event_id: str, label: str, error_class: str
) -> None:
    """The provider's data is never dropped: accepted, recorded with no subject, counted in
    `gateway_dlq_total{stage="ingest"}` once; its repeat is a duplicate and not counted."""
    answer = await post(gw, request_of())
    assert (answer.status, answer.json()) == (200, {"status": "accepted", "event_id": event_id})
    (parked,) = gw.inbox.parked
    assert parked.subject is None and parked.failure is not None
    assert parked.failure.error_class == error_class
    stored = [parked.event_id, parked.event_type or "", *parked.headers, *parked.headers.values()]
    assert not [text for text in stored if "\x00" in text]  # PostgreSQL could not store it
    assert gw.dlq_total() == {("ingest", error_class): 1}
    assert (await post(gw, request_of())).json()["status"] == "duplicate"
    assert gw.dlq_total() == {("ingest", error_class): 1}
    assert gw.webhooks_total() == {(label, "accepted"): 1, (label, "duplicate"): 1}


# --- health, readiness, metrics, routing -----------------------------------------------------


async def test_healthz_answers_while_running(gw: Gateway) -> None:
    """`/healthz` says the process is alive, and is not an ingestion request."""
    answer = await call(gw.app, "GET", "/healthz")
    assert (answer.status, answer.json()) == (200, {"status": "ok"})
    assert gw.requests_timed() == 0


@pytest.mark.parametrize(
    ("database", "nats", "status"),
    [(True, True, 200), (False, True, 503), (True, False, 503), (False, False, 503)],
)
async def test_readyz_needs_both_the_database_and_nats(
    gw: Gateway, database: bool, nats: bool, status: int
) -> None:
    """`/readyz` is 200 only when both probes answer, and names which one is down."""
    gw.database.up, gw.broker.up = database, nats
    answer = await call(gw.app, "GET", "/readyz")
    assert answer.status == status
    expected = "ready" if status == 200 else "not_ready"
    assert answer.json() == {
        "status": expected,
        "database": database,
        "nats": nats,
        # The fakes' probe reads no durability (a real process's does, every 30 s).
        "durability": {
            "state": "unknown",
            "synchronous_standbys": 0,
            "reason": "not_read",
        },
    }
    assert (gw.database.pings, gw.broker.pings) == (1, 1)


async def test_metrics_renders_the_prometheus_text(gw: Gateway) -> None:
    """`/metrics` serves the text exposition with the contract's names and the counts so far."""
    await post(gw, stripe(STRIPE_BODY))
    answer = await call(gw.app, "GET", "/metrics")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = answer.body.decode()
    assert "# TYPE gateway_webhooks_total counter" in text
    assert "# TYPE gateway_request_seconds histogram" in text
    lines = text.splitlines()
    assert 'gateway_webhooks_total{outcome="accepted",provider="stripe"} 1.0' in lines
    assert 'gateway_request_seconds_bucket{le="+Inf"} 1.0' in lines
    assert "gateway_request_seconds_count 1.0" in lines
    assert not [line for line in lines if "_created" in line]  # kept out, as before


@pytest.mark.parametrize("path", ["/webhooks/stripe", "/webhooks/nosuch", "/v1/events"])
async def test_other_methods_on_an_ingestion_path_are_405(gw: Gateway, path: str) -> None:
    """Only POST ingests: a GET is refused with 405 and is not counted as a delivery."""
    answer = await call(gw.app, "GET", path)
    assert answer.status == 405
    assert gw.inbox.offered == []
    assert gw.webhooks_total() == {}


@pytest.mark.parametrize("request_of", [lambda: stripe(STRIPE_BODY), lambda: event(EVENT_BODY)])
@pytest.mark.parametrize("when", ["before start-up", "after shutdown"])
async def test_ingestion_outside_the_lifespan_is_503_starting_up(
    request_of: Callable[[], Request], when: str
) -> None:
    """Before the lifespan has opened the parts (or after it closed them) an ingestion
    request is told to retry in a second; nothing reaches the inbox."""
    gw = Gateway(make_settings())
    if when == "after shutdown":
        async with lifespan(gw.app):
            pass
    answer = await post(gw, request_of())
    assert answer.status == 503
    assert answer.headers["retry-after"] == "1"
    assert answer.json() == {"error": "unavailable", "detail": "starting up"}
    assert gw.inbox.offered == []
    assert gw.webhooks_total() == {}
