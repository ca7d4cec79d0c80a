"""A small Prometheus registry: counters, gauges and histograms with labels, rendered in
the text exposition format. Enough for `/metrics`; no global state, the composition root
owns the one `Metrics` instance."""

from __future__ import annotations

import asyncio
import bisect
import http
import math
from collections.abc import Awaitable, Callable, Sequence

Labels = tuple[tuple[str, str], ...]

_REQUEST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(labels: Labels, extra: str = "") -> str:
    parts = [f'{k}="{_escape(v)}"' for k, v in labels]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Counter:
    """A monotonically increasing count per label set."""

    kind = "counter"

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, **labels: str) -> float:
        return self.values.get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> list[str]:
        return [f"{self.name}{_label_text(k)} {_number(v)}" for k, v in sorted(self.values.items())]


class Gauge(Counter):
    """A value that goes up and down, per label set."""

    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        self.values[tuple(sorted(labels.items()))] = value


class Histogram:
    """Observations counted into cumulative buckets, per label set."""

    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, buckets: Sequence[float] = _REQUEST_BUCKETS_S
    ) -> None:
        self.name, self.help = name, help_text
        self.buckets = tuple(sorted(buckets))
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = ([0] * (len(self.buckets) + 1), [0.0])
        counts, totals = series
        counts[bisect.bisect_left(self.buckets, value)] += 1
        totals[0] += value

    def render(self) -> list[str]:
        lines = []
        for key, (counts, totals) in sorted(self.series.items()):
            cumulative = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                cumulative += count
                le = 'le="' + _number(bound) + '"'
                lines.append(f"{self.name}_bucket{_label_text(key, le)} {cumulative}")
            lines.append(f"{self.name}_sum{_label_text(key)} {_number(totals[0])}")
            lines.append(f"{self.name}_count{_label_text(key)} {cumulative}")
        return lines


class Metrics:
    """Every metric the gateway exports; names are part of the public contract."""

    def __init__(self) -> None:
        self.webhooks_total = Counter(
            "gateway_webhooks_total", "Webhook and event deliveries by provider and outcome."
        )
        self.request_seconds = Histogram(
            "gateway_request_seconds", "Time to answer an ingestion request."
        )
        self.http_refused_total = Counter(
            "gateway_http_refused_total",
            "Requests and connections refused at the HTTP edge, by reason (header_too_large, "
            "header_timeout, no_request, over_capacity).",
        )
        self.duplicates_from_memory_total = Counter(
            "gateway_duplicates_from_memory_total",
            "Repeats answered 'duplicate' from this process's memory of committed rows.",
        )
        self.outbox_pending = Gauge(
            "gateway_outbox_pending", "Recorded events not yet confirmed by JetStream."
        )
        self.outbox_lag_seconds = Gauge(
            "gateway_outbox_lag_seconds", "Age of the oldest event not yet confirmed by JetStream."
        )
        self.published_total = Counter(
            "gateway_published_total", "Events confirmed by JetStream, by path (inline, relay)."
        )
        self.retries_total = Counter(
            "gateway_retries_total", "Retries scheduled by consumers, by subject."
        )
        self.dlq_total = Counter(
            "gateway_dlq_total", "Events parked in the dead-letter table, by stage and error class."
        )
        self.settlements_total = Counter(
            "gateway_settlements_total",
            "Settlement outcomes (settled, duplicate, ignored, retry, dead_letter).",
        )
        self.critical_total = Counter(
            "gateway_critical_total",
            "Critical events (ledger collisions, imbalance, ledger down for good).",
        )
        self.dlq_unresolved = Gauge("gateway_dlq_unresolved", "Dead-letter rows not yet resolved.")
        self.backfill_events_total = Counter(
            "gateway_backfill_events_total",
            "Events listed by a provider's API during backfill, by provider and outcome "
            "(present, recovered, failed); recovered means a webhook never arrived.",
        )
        self.backfill_last_complete = Gauge(
            "gateway_backfill_last_complete_timestamp_seconds",
            "When the provider's last backfill pass completed (Unix time).",
        )
        self.dlq_oldest_unresolved_seconds = Gauge(
            "gateway_dlq_oldest_unresolved_seconds", "Age of the oldest unresolved dead-letter row."
        )

    def _all(self) -> list[Counter | Histogram]:
        return [v for v in vars(self).values() if isinstance(v, Counter | Histogram)]

    def render(self) -> str:
        """The Prometheus text exposition of every metric."""
        lines: list[str] = []
        for metric in self._all():
            lines.append(f"# HELP {metric.name} {metric.help}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"


#: The Prometheus text exposition's content type.
METRICS_TYPE = "text/plain; version=0.0.4"
#: A request head must arrive within this long; an idle connection is closed after it.
HEAD_TIMEOUT_S = 5.0
#: Connections served at once; more are closed unanswered. Scrapers and probes open one
#: or two at a time, so this only bounds what a flood of sockets can hold.
MAX_CONNECTIONS = 64

#: Answers one request (method, path) with (status, content type, body).
Answer = Callable[[str, str], Awaitable[tuple[int, str, bytes]]]


async def serve_plain_http(
    answer: Answer, host: str, port: int, *, reuse_port: bool = False
) -> asyncio.Server:
    """A minimal one-request-per-connection HTTP listener for scrapers and probes.

    The head must arrive within `HEAD_TIMEOUT_S` and fit the stream reader's 64 KiB
    limit, and at most `MAX_CONNECTIONS` are served at once; anything else closes the
    connection without an answer.
    """
    active = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal active
        if active >= MAX_CONNECTIONS:
            writer.close()
            return
        active += 1
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            status, content_type, body = await answer(method, path)
            writer.write(
                f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client left, stalled or sent more head than a GET needs
        finally:
            active -= 1
            writer.close()

    return await asyncio.start_server(serve, host, port, reuse_port=reuse_port)


async def serve_metrics(metrics: Metrics, host: str, port: int) -> asyncio.Server:
    """A minimal HTTP endpoint answering any GET with the metrics, for processes without
    a web server of their own (`gateway settle`, `gateway relay`)."""

    async def answer(method: str, path: str) -> tuple[int, str, bytes]:
        return 200, METRICS_TYPE, metrics.render().encode()

    return await serve_plain_http(answer, host, port)
