"""The gateway's stream on the NATS server: every process creates it when it is missing
and refuses one that differs; only `gateway migrate` changes an existing one.

A gateway that updated whatever stream of that name it found would rewrite, on a shared
server, a stream some other team configured, or quietly shorten the duplicate window
it relies on.

On a server that takes atomic batches (2.12+) the stream is created with `allow_atomic`,
and `gateway migrate` adds it to one without; a stream found without it is accepted
(`StreamFound.atomic` says so, and the relay publishes one message at a time).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig

from gateway.adapters.jetstream.publish import NATS_ERRORS
from gateway.core.relay.stream import StreamShape, differences, upgrades, wanted_shape
from gateway.errors import BrokerUnavailable, StreamMismatch, StreamUpdateRefused
from gateway.settings import NatsSettings


@dataclass(frozen=True)
class StreamChange:
    """What `gateway migrate` did to the stream."""

    stream: str
    action: str  # created | updated | unchanged
    changes: tuple[str, ...] = ()  # "duplicate window 60 s -> 120 s", for `updated`

    def to_json(self) -> dict[str, object]:
        return {"name": self.stream, "action": self.action, "changes": list(self.changes)}

    def line(self) -> str:
        if self.action == "updated":
            return f"stream {self.stream} updated: {'; '.join(self.changes)}"
        return f"stream {self.stream} {self.action}"


#: The first nats-server release with atomic batch publishing (ADR-50).
ATOMIC_SINCE = (2, 12)


@dataclass(frozen=True)
class StreamFound:
    """What a process found (or created) on the server."""

    created: bool
    atomic: bool  # the stream takes atomic batches (`allow_atomic`)


def server_takes_batches(nc: Client) -> bool:
    """True when the connected server is recent enough for atomic batches (2.12+)."""
    version = nc.connected_server_version
    return (version.major, version.minor) >= ATOMIC_SINCE


def _wanted(settings: NatsSettings, batches: bool) -> StreamShape:
    return wanted_shape(settings.duplicate_window_s, settings.replicas, batches=batches)


def _text(value: object, default: str) -> str:
    """An enum's value (nats-py returns enums) or a plain string, as the server names it."""
    return str(getattr(value, "value", value) or default)


def shape_of(config: StreamConfig) -> StreamShape:
    """The fields the gateway relies on, with the server's defaults where unset."""
    return StreamShape(
        subjects=tuple(config.subjects or ()),
        retention=_text(config.retention, "limits"),
        storage=_text(config.storage, "file"),
        duplicate_window_s=float(config.duplicate_window or 0.0),
        replicas=int(config.num_replicas or 1),
        allow_atomic=bool(config.allow_atomic),
    )


def _applied(config: StreamConfig, wanted: StreamShape) -> StreamConfig:
    """`config` with the gateway's fields set to `wanted`, everything else kept
    (`allow_atomic` is only ever added: an older server does not know the field)."""
    return dataclasses.replace(
        config,
        subjects=list(wanted.subjects),
        retention=RetentionPolicy(wanted.retention),
        storage=StorageType(wanted.storage),
        duplicate_window=wanted.duplicate_window_s,
        num_replicas=wanted.replicas,
        allow_atomic=True if wanted.allow_atomic else config.allow_atomic,
    )


async def _existing(js: JetStreamContext, name: str) -> StreamConfig | None:
    try:
        info = await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        return None
    return info.config


async def ensure_stream(
    js: JetStreamContext, settings: NatsSettings, *, batches: bool
) -> StreamFound:
    """Create the stream when it is missing; accept an existing one as configured. One
    that differs raises `StreamMismatch` naming every difference. `batches`: the server
    takes atomic batches (`server_takes_batches`)."""
    wanted = _wanted(settings, batches)
    try:
        found = await _existing(js, settings.stream)
        if found is None:
            await js.add_stream(_applied(StreamConfig(name=settings.stream), wanted))
            return StreamFound(created=True, atomic=batches)
    except NATS_ERRORS as exc:
        # Also a create that lost a race to another process creating it differently:
        # the next try finds that stream and compares it.
        raise BrokerUnavailable(f"cannot create stream: {type(exc).__name__}") from exc
    shape = shape_of(found)
    found_differences = differences(shape, wanted)
    if found_differences:
        raise StreamMismatch(settings.stream, found_differences)
    return StreamFound(created=False, atomic=batches and shape.allow_atomic)


async def migrate_stream(
    js: JetStreamContext, settings: NatsSettings, *, batches: bool
) -> StreamChange:
    """`gateway migrate`'s part: create the stream, or bring the fields the gateway relies
    on to the configured values and add `allow_atomic` where the server takes atomic
    batches (the stream's other settings are kept)."""
    wanted = _wanted(settings, batches)
    try:
        found = await _existing(js, settings.stream)
        if found is None:
            await js.add_stream(_applied(StreamConfig(name=settings.stream), wanted))
            return StreamChange(settings.stream, "created")
        shape = shape_of(found)
        changes = differences(shape, wanted) + upgrades(shape, wanted)
        if not changes:
            return StreamChange(settings.stream, "unchanged")
        await js.update_stream(_applied(found, wanted))
    except nats.js.errors.APIError as exc:
        # The server's own words say which field it will not change; nothing secret.
        raise StreamUpdateRefused(
            f"NATS refused to create or update stream {settings.stream}: "
            f"{exc.description or type(exc).__name__} (error {exc.err_code})"
        ) from exc
    except NATS_ERRORS as exc:
        raise BrokerUnavailable(f"cannot reach the stream: {type(exc).__name__}") from exc
    return StreamChange(settings.stream, "updated", tuple(d.change for d in changes))


async def _reported_by_the_caller(exc: Exception) -> None:
    """nats-py's own error callback logs every failed try with its stack; a command that
    cannot connect says so in the one line of the `BrokerUnavailable` it raises."""


@contextlib.asynccontextmanager
async def _connected(
    settings: NatsSettings, name: str
) -> AsyncIterator[tuple[JetStreamContext, bool]]:
    """A JetStream context over a connection of the block's own, failing fast
    (`BrokerUnavailable`) rather than retrying as a long-running process does; and
    whether the server takes atomic batches."""
    timeout_s = settings.request_timeout_s
    try:
        nc = await nats.connect(
            settings.servers,
            name=name,
            connect_timeout=max(1, int(timeout_s)),
            max_reconnect_attempts=1,  # two tries in all (see `one_shot`)
            reconnect_time_wait=0.5,
            allow_reconnect=False,
            error_cb=_reported_by_the_caller,
        )
    except NATS_ERRORS as exc:
        raise BrokerUnavailable(f"NATS is not reachable: {type(exc).__name__}") from exc
    try:
        yield nc.jetstream(timeout=timeout_s), server_takes_batches(nc)
    finally:
        with contextlib.suppress(*NATS_ERRORS):
            await nc.close()


async def migrate(settings: NatsSettings) -> StreamChange:
    """`gateway migrate`: create or update the stream over a connection of its own."""
    async with _connected(settings, "gateway-migrate") as (js, batches):
        return await migrate_stream(js, settings, batches=batches)


async def check(settings: NatsSettings) -> None:
    """`gateway serve`'s look before it starts anything: create the stream if it is
    missing, raise `StreamMismatch` if it differs. A NATS that does not answer is left to
    the serving process, which starts without it and connects in the background."""
    # Quick: a NATS that does not answer at once is the background connector's to wait for.
    quick = dataclasses.replace(settings, request_timeout_s=min(settings.request_timeout_s, 2.0))
    with contextlib.suppress(BrokerUnavailable):
        async with _connected(quick, "gateway-serve-check") as (js, batches):
            await ensure_stream(js, quick, batches=batches)
