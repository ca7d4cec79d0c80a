"""The gateway's stream, as the gateway needs it, and how a stream found on the server
differs from that.

Pure: the adapter reads the server's stream into a `StreamShape` and decides with these.
Only the fields the gateway relies on are compared; limits an operator set on the stream
(`max_age`, `max_bytes`, ...) are theirs and left alone.

`allow_atomic` (atomic batch publishing, nats-server 2.12+) is wanted but not required:
a stream without it is no mismatch, the relay publishes one message at a time there
(and says so), and `gateway migrate` adds it (`upgrades`). An upgrade of the gateway
never stops ingestion for want of a `gateway migrate`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Every subject the gateway publishes on: provider webhooks and internal events.
STREAM_SUBJECTS = ("webhooks.>", "events.>")
#: The stream keeps messages by limits (consumers each read all of it) on disk.
RETENTION = "limits"
STORAGE = "file"


@dataclass(frozen=True)
class StreamShape:
    """What the gateway relies on in a stream."""

    subjects: tuple[str, ...]
    retention: str  # limits | interest | workqueue
    storage: str  # file | memory
    duplicate_window_s: float
    replicas: int
    allow_atomic: bool = False  # takes atomic batches (ADR-50)


def wanted_shape(duplicate_window_s: float, replicas: int, *, batches: bool) -> StreamShape:
    """The stream the configuration asks for; `batches`: the server takes atomic batches
    (2.12+), so the stream should too."""
    return StreamShape(
        STREAM_SUBJECTS, RETENTION, STORAGE, float(duplicate_window_s), replicas, batches
    )


@dataclass(frozen=True)
class Difference:
    """One field where the stream found is not the one configured, as an operator reads
    it: `subjects webhooks.> (configured events.>, webhooks.>)`."""

    field: str
    found: str
    wanted: str

    def __str__(self) -> str:
        return f"{self.field} {self.found} (configured {self.wanted})"

    @property
    def change(self) -> str:
        """What `gateway migrate` changed: `duplicate window 60 s -> 120 s`."""
        return f"{self.field} {self.found} -> {self.wanted}"


def differences(found: StreamShape, wanted: StreamShape) -> list[Difference]:
    """Each field where `found` is not `wanted`, in a fixed order; empty when the stream
    is as configured.

    Subjects compare as sets (the server may list them in another order); a duplicate
    window within a millisecond is the same one (the server keeps nanoseconds).
    """
    out: list[Difference] = []
    if set(found.subjects) != set(wanted.subjects):
        out.append(Difference("subjects", _subjects(found.subjects), _subjects(wanted.subjects)))
    if found.retention != wanted.retention:
        out.append(Difference("retention", found.retention, wanted.retention))
    if found.storage != wanted.storage:
        out.append(Difference("storage", found.storage, wanted.storage))
    if abs(found.duplicate_window_s - wanted.duplicate_window_s) >= 0.001:
        window = Difference(
            "duplicate window",
            f"{found.duplicate_window_s:g} s",
            f"{wanted.duplicate_window_s:g} s",
        )
        out.append(window)
    if found.replicas != wanted.replicas:
        out.append(Difference("replicas", str(found.replicas), str(wanted.replicas)))
    return out


def upgrades(found: StreamShape, wanted: StreamShape) -> list[Difference]:
    """What `gateway migrate` adds beyond `differences`: what the gateway uses when it is
    there and does without otherwise (`allow_atomic`). Never taken away."""
    if wanted.allow_atomic and not found.allow_atomic:
        return [Difference("allow_atomic", "false", "true")]
    return []


def _subjects(subjects: tuple[str, ...]) -> str:
    return ", ".join(sorted(subjects)) or "none"
