"""Toxics in Toxiproxy's vocabulary: what each does to the bytes of one direction.

A `Toxic` is the value the HTTP API and the tests exchange (`name`, `type`, `stream`,
`toxicity`, `attributes`, with Toxiproxy's attribute names and units: milliseconds,
microseconds for `slicer.delay`, KB/s for `bandwidth.rate`). Its behaviour is a stage
in a chain: it receives one chunk with the time it arrived at the proxy and passes
zero or more chunks on to the next stage, possibly later. Stages see the connection
only through `LinkControl` (close it, reset it), so they are easy to test alone.

Semantics follow Toxiproxy's:

| type | attributes | effect |
|---|---|---|
| latency | latency, jitter (ms) | each chunk leaves `latency ± jitter` after it arrived |
| bandwidth | rate (KB/s) | at most `rate` kilobytes a second |
| slicer | average_size, size_variation (bytes), delay (µs) | chunks cut small, `delay` apart |
| timeout | timeout (ms) | data dropped (black hole); connection closed after `timeout` (0: never) |
| reset_peer | timeout (ms) | on data, wait `timeout`, then reset the connection (TCP RST) |
| limit_data | bytes | connection closed once `bytes` have passed |
"""

from __future__ import annotations

import asyncio
import enum
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Emit = Callable[[bytes], Awaitable[None]]


class Stream(enum.StrEnum):
    """Direction, as Toxiproxy names it: upstream is client → server."""

    UPSTREAM = "upstream"
    DOWNSTREAM = "downstream"


#: Every toxic type and its attributes with their defaults.
TOXIC_TYPES: dict[str, dict[str, float]] = {
    "latency": {"latency": 0, "jitter": 0},
    "bandwidth": {"rate": 0},
    "slicer": {"average_size": 0, "size_variation": 0, "delay": 0},
    "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0},
    "limit_data": {"bytes": 0},
}


class ToxicError(ValueError):
    """A toxic description that cannot be applied (unknown type, stream or attribute)."""


class ToxicExists(ToxicError):
    """A toxic of that name is already on the proxy."""


@dataclass
class Toxic:
    """One toxic on one proxy, as the API shows it."""

    type: str
    stream: Stream = Stream.DOWNSTREAM
    name: str = ""
    toxicity: float = 1.0
    attributes: dict[str, float] = field(default_factory=dict)
    #: Bumped on every update, so links re-roll toxicity and reset per-link state.
    version: int = 0

    def __post_init__(self) -> None:
        if self.type not in TOXIC_TYPES:
            raise ToxicError(f"invalid toxic type {self.type!r}")
        try:
            self.stream = Stream(self.stream)
        except ValueError:
            raise ToxicError("stream was invalid, can be either upstream or downstream") from None
        if not 0.0 <= float(self.toxicity) <= 1.0:
            raise ToxicError(f"toxicity must be between 0 and 1, got {self.toxicity!r}")
        self.name = self.name or f"{self.type}_{self.stream.value}"
        self.attributes = _attributes(self.type, self.attributes)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Toxic:
        """A toxic from Toxiproxy's JSON shape."""
        return cls(
            type=str(doc.get("type", "")),
            stream=doc.get("stream", Stream.DOWNSTREAM.value),
            name=str(doc.get("name") or ""),
            toxicity=float(doc.get("toxicity", 1.0)),
            attributes=dict(doc.get("attributes") or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream.value,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }

    def update(self, doc: Mapping[str, Any]) -> None:
        """Change toxicity and attributes in place (Toxiproxy's toxic update)."""
        if "toxicity" in doc:
            toxicity = float(doc["toxicity"])
            if not 0.0 <= toxicity <= 1.0:
                raise ToxicError(f"toxicity must be between 0 and 1, got {toxicity!r}")
            self.toxicity = toxicity
        merged = {**self.attributes, **dict(doc.get("attributes") or {})}
        self.attributes = _attributes(self.type, merged)
        self.version += 1


def _attributes(kind: str, given: Mapping[str, Any]) -> dict[str, float]:
    known = TOXIC_TYPES[kind]
    unknown = set(given) - set(known)
    if unknown:
        raise ToxicError(f"{kind}: unknown attribute(s) {sorted(unknown)}")
    values: dict[str, float] = {}
    for key, default in known.items():
        value = given.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ToxicError(f"{kind}.{key} must be a non-negative number, got {value!r}")
        values[key] = float(value)
    return values


class LinkControl(Protocol):
    """What a toxic may do to the connection it sits on."""

    def close(self) -> None:
        """Close both sides gracefully (FIN)."""

    def reset(self) -> None:
        """Reset both sides (TCP RST): unsent data is discarded."""


@dataclass
class LinkState:
    """What one toxic remembers about one connection."""

    active: bool  # the toxicity roll for this connection
    version: int
    transmitted: int = 0  # limit_data
    timer: asyncio.TimerHandle | None = None  # timeout


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


async def apply(
    toxic: Toxic,
    state: LinkState,
    link: LinkControl,
    data: bytes,
    arrived: float,
    emit: Emit,
) -> None:
    """Pass one chunk through `toxic` (already rolled active for this connection)."""
    a = toxic.attributes
    if toxic.type == "latency":
        jitter_ms = a["jitter"]
        delay_ms = a["latency"] + (random.uniform(-jitter_ms, jitter_ms) if jitter_ms else 0.0)
        await _sleep_until(arrived + max(0.0, delay_ms) / 1000)
        await emit(data)
    elif toxic.type == "bandwidth":
        if a["rate"] > 0:
            await asyncio.sleep(len(data) / (a["rate"] * 1000))
        await emit(data)
    elif toxic.type == "slicer":
        for piece in slices(data, int(a["average_size"]), int(a["size_variation"])):
            await emit(piece)
            if a["delay"]:
                await asyncio.sleep(a["delay"] / 1_000_000)
    elif toxic.type == "timeout":
        return  # a black hole: the data is dropped; the timer (see `attach`) closes
    elif toxic.type == "reset_peer":
        await asyncio.sleep(a["timeout"] / 1000)
        link.reset()
    elif toxic.type == "limit_data":
        remaining = max(0, int(a["bytes"]) - state.transmitted)
        piece = data[:remaining]
        if piece:
            state.transmitted += len(piece)
            await emit(piece)
        if state.transmitted >= int(a["bytes"]):
            link.close()


def slices(data: bytes, average_size: int, size_variation: int) -> list[bytes]:
    """Cut `data` into pieces of `average_size ± size_variation` bytes (at least 1)."""
    if average_size <= 0:
        return [data]
    pieces, start = [], 0
    while start < len(data):
        size = average_size
        if size_variation:
            size += random.randint(-size_variation, size_variation)
        size = max(1, size)
        pieces.append(data[start : start + size])
        start += size
    return pieces


def attach(toxic: Toxic, state: LinkState, link: LinkControl) -> None:
    """Start what a toxic does without data: `timeout` closes the link after its delay."""
    if toxic.type == "timeout" and toxic.attributes["timeout"] > 0 and state.timer is None:
        loop = asyncio.get_running_loop()
        state.timer = loop.call_later(toxic.attributes["timeout"] / 1000, link.close)


def detach(state: LinkState) -> None:
    """Undo `attach` when the toxic is removed or changed."""
    if state.timer is not None:
        state.timer.cancel()
        state.timer = None


def roll(toxic: Toxic) -> LinkState:
    """A fresh per-connection state: does this toxic apply to this connection?"""
    return LinkState(active=random.random() < toxic.toxicity, version=toxic.version)
