"""The gateway's metrics, over `prometheus_client` (this package is the only place that
imports it): the families with the gateway's call shape (`families`), `Metrics` with
every metric the gateway exports (`registry`), the merging of several processes' figures
(`shared`) and the `/metrics` listener of `relay` and `settle` (`listener`).

Call sites keep one shape: `metrics.webhooks_total.inc(provider=..., outcome=...)`,
`.observe(...)`, `.set(...)`, `.get(...)` and `render()`. No global state: the
composition root owns the process's one `Metrics`.
"""

from gateway.metrics.families import Counter, Gauge, Histogram
from gateway.metrics.listener import (
    METRICS_TYPE,
    ListenAddress,
    metrics_listener,
    serve_plain_http,
)
from gateway.metrics.registry import Metrics
from gateway.metrics.shared import MULTIPROC_ENV, multiprocess_dir

__all__ = [
    "METRICS_TYPE",
    "MULTIPROC_ENV",
    "Counter",
    "Gauge",
    "Histogram",
    "ListenAddress",
    "Metrics",
    "metrics_listener",
    "multiprocess_dir",
    "serve_plain_http",
]
