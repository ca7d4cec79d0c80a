"""A real OTLP/HTTP trace receiver for tests: `POST /v1/traces` on loopback, decoded
with the official `opentelemetry-proto` classes (the collector is not installable here).

Every span received is kept as a `ReceivedSpan`, ids in hex as the logs write them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.services import free_port, wait_until

#: `Status.code` of a span marked failed (STATUS_CODE_ERROR).
STATUS_ERROR = 2


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, as the receiver decoded it."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    kind: int
    attributes: dict[str, Any]
    status_code: int
    links: tuple[tuple[str, str], ...]  # (trace id, span id) of each link


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return None if which is None else getattr(value, which)


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one `ExportTraceServiceRequest`."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        status_code=span.status.code,
                        links=tuple((x.trace_id.hex(), x.span_id.hex()) for x in span.links),
                    )
                )
    return found


class OtlpReceiver:
    """The spans received so far, and ways to wait for more."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.spans: list[ReceivedSpan] = []
        self.requests = 0

    async def receive(self, request: Request) -> Response:
        if request.headers.get("content-type") != "application/x-protobuf":
            return Response(status_code=415)
        self.spans.extend(decode(await request.body()))
        self.requests += 1
        answer = ExportTraceServiceResponse().SerializeToString()
        return Response(answer, media_type="application/x-protobuf")

    def where(self, test: Callable[[ReceivedSpan], bool]) -> list[ReceivedSpan]:
        return [s for s in self.spans if test(s)]

    async def wait_for(
        self, test: Callable[[ReceivedSpan], bool], count: int = 1, timeout_s: float = 20
    ) -> list[ReceivedSpan]:
        """The spans passing `test`, once there are at least `count`."""

        async def enough() -> bool:
            return len(self.where(test)) >= count

        await wait_until(enough, timeout_s=timeout_s)
        return self.where(test)


@contextlib.asynccontextmanager
async def running_receiver() -> AsyncIterator[OtlpReceiver]:
    """An OTLP/HTTP receiver served by uvicorn on a free loopback port."""
    port = free_port()
    receiver = OtlpReceiver(port)
    app = Starlette(routes=[Route("/v1/traces", receiver.receive, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield receiver
    finally:
        server.should_exit = True
        await task
