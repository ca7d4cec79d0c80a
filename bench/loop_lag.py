"""The serving process's event-loop lag over one pass, from the histogram it exports
(`gateway_event_loop_lag_seconds`), read before and after the pass: how late a 10 ms
timer woke while the load ran, the difference of two cumulative readings."""

from __future__ import annotations

import math
import re
from typing import Any

import httpx

_BUCKET = re.compile(r'^gateway_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.M)

#: Cumulative counts by upper bound (seconds; `math.inf` last).
Buckets = dict[float, float]


def read_buckets(base_url: str) -> Buckets | None:
    """The histogram's cumulative buckets, or None where the server exports none (the
    bare endpoint)."""
    try:
        text = httpx.get(base_url + "/metrics", timeout=5).text
    except httpx.HTTPError:
        return None
    found = {float(le): float(count) for le, count in _BUCKET.findall(text)}
    return found or None


def over_pass(before: Buckets | None, after: Buckets | None) -> dict[str, Any] | None:
    """The pass's samples, p99 (interpolated within its bucket, as PromQL's
    `histogram_quantile` does) and the bound the largest sample stayed under, in ms."""
    if before is None or after is None:
        return None
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    return {
        "samples": int(total),
        "p99_ms": _ms(quantile(0.99, bounds, counts)),
        "max_under_ms": _ms(next(b for b, c in zip(bounds, counts, strict=True) if c >= total)),
    }


def quantile(q: float, bounds: list[float], cumulative: list[float]) -> float:
    """The q-quantile of cumulative bucket counts, linear within its bucket; the highest
    finite bound when it falls in the last (+Inf) one."""
    rank = q * cumulative[-1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in zip(bounds, cumulative, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            width = count - lower_count
            share = 1.0 if width <= 0 else (rank - lower_count) / width
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def _ms(seconds: float) -> float | None:
    return None if math.isinf(seconds) else round(seconds * 1000, 3)
