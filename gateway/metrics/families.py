"""Counters, gauges and histograms with the gateway's call shape over
`prometheus_client`'s: labels as keywords at each call (`inc(provider=..., outcome=...)`),
and `get`/`values` reading this process's figures (tests and the in-process alerts)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry

Labels = tuple[tuple[str, str], ...]

REQUEST_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# The exposition stays what it was: no `_created` series beside counters and histograms
# (a start timestamp per series; nothing here reads them, and they double the output).
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated there


class Counter:
    """A monotonically increasing count per label set."""

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name, self.help = name, help_text
        self.labelnames = tuple(labelnames)
        self._metric = self._make(registry or CollectorRegistry(auto_describe=False))
        # The children by the call site's keyword items: one dict look-up per call
        # instead of prometheus_client's `labels(**kw)` (sort, check, lock) every time.
        self._children: dict[Labels, Any] = {}
        self._sample = name if name.endswith("_total") else name + "_total"

    def _make(self, registry: CollectorRegistry) -> Any:
        return prometheus_client.Counter(self.name, self.help, self.labelnames, registry=registry)

    def _child(self, labels: dict[str, str]) -> Any:
        key = tuple(labels.items())
        child = self._children.get(key)
        if child is None:
            child = self._metric.labels(**labels) if self.labelnames else self._metric
            if not self.labelnames and labels:
                raise ValueError(f"{self.name} has no labels, got {sorted(labels)}")
            self._children[key] = child
        return child

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self._child(labels).inc(amount)

    @property
    def values(self) -> dict[Labels, float]:
        """This process's value of every label set seen so far (labels sorted by name)."""
        return {
            tuple(sorted(s.labels.items())): s.value
            for family in self._metric.collect()
            for s in family.samples
            if s.name == self._sample
        }

    def get(self, **labels: str) -> float:
        """This process's value for one label set (0 if never counted)."""
        return self.values.get(tuple(sorted(labels.items())), 0.0)


class Gauge(Counter):
    """A value that goes up and down, per label set.

    `multiprocess_mode` says how the workers' values combine into the one scraped
    (prometheus_client's modes: `livesum`, `livemax`, `livemostrecent`, ...).
    """

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
        multiprocess_mode: str = "livesum",
    ) -> None:
        self._mode = multiprocess_mode
        super().__init__(name, help_text, labelnames, registry)
        self._sample = name

    def _make(self, registry: CollectorRegistry) -> Any:
        return prometheus_client.Gauge(
            self.name,
            self.help,
            self.labelnames,
            registry=registry,
            multiprocess_mode=self._mode,  # type: ignore[arg-type]  # a Literal there
        )

    def set(self, value: float, **labels: str) -> None:
        self._child(labels).set(value)


class Histogram(Counter):
    """Observations counted into cumulative buckets, per label set."""

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
        buckets: Sequence[float] = REQUEST_BUCKETS_S,
    ) -> None:
        self.buckets = tuple(sorted(buckets))
        super().__init__(name, help_text, labelnames, registry)
        self._sample = name + "_count"
        # The observe of each label set's child, by the call site's keyword items.
        self._observers: dict[Labels, Callable[[float], None]] = {}

    def _make(self, registry: CollectorRegistry) -> Any:
        return prometheus_client.Histogram(
            self.name, self.help, self.labelnames, registry=registry, buckets=self.buckets
        )

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        raise TypeError("a histogram is observed, not incremented")

    def observe(self, value: float, **labels: str) -> None:
        observer = self._observers.get(tuple(labels.items()))
        if observer is None:
            observer = self._observers[tuple(labels.items())] = _observer(self._child(labels))
        observer(value)


def _observer(child: Any) -> Callable[[float], None]:
    """`child.observe`, or the same in fewer steps: prometheus_client's walks the bucket
    bounds in Python and locks twice (about 1.7 µs on every request); this finds the
    bucket by bisection. It reads the child's parts (`_upper_bounds`, `_buckets`,
    `_sum`), so without them it is the library's own `observe`; tests/unit/metrics holds
    the two exposing the same figures."""
    try:
        bounds: list[float] = list(child._upper_bounds)
        buckets: list[Any] = list(child._buckets)
        total: Any = child._sum
    except AttributeError:
        return child.observe  # type: ignore[no-any-return]
    library_observe = child.observe
    bucket_of = bisect.bisect_left

    def observe(value: float) -> None:
        if value != value:  # NaN counts in no bucket there; left to the library
            library_observe(value)
            return
        total.inc(value)
        buckets[bucket_of(bounds, value)].inc(1)

    return observe
