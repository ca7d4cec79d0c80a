"""A minimal OTLP/HTTP trace sink for `python -m bench.run --tracing`: accepts
`POST /v1/traces` on loopback, counts requests and bytes, and answers an empty (valid)
`ExportTraceServiceResponse`. It decodes nothing: the benchmark measures what exporting
costs the gateway, not a collector.

A thread in the benchmark's own process (its CPU shows under "others", beside wrk),
stdlib only, so the benchmark needs no collector installed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class SinkCounts:
    """What the sink received so far."""

    requests: int = 0
    bytes: int = 0
    refused: int = 0  # anything but POST /v1/traces

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "bytes": self.bytes, "refused": self.refused}


class _Handler(BaseHTTPRequestHandler):
    server: _SinkServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's session expects

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        counts = self.server.counts
        with self.server.lock:
            if self.path == "/v1/traces":
                counts.requests += 1
                counts.bytes += len(body)
            else:
                counts.refused += 1
        status = 200 if self.path == "/v1/traces" else 404
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")  # an empty response message is b""
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None  # one line per export would flood the benchmark's output


class _SinkServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.counts = SinkCounts()
        self.lock = threading.Lock()


@dataclass(frozen=True)
class Sink:
    """A running sink: the `[tracing] endpoint` to give the gateway, and its counts."""

    endpoint: str
    counts: SinkCounts


@contextmanager
def running_sink() -> Iterator[Sink]:
    """The sink on a free loopback port, served from a thread until the block ends."""
    server = _SinkServer()
    thread = threading.Thread(target=server.serve_forever, name="otlp-sink", daemon=True)
    thread.start()
    try:
        yield Sink(f"http://127.0.0.1:{server.server_address[1]}", server.counts)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
